import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from audit.arguments import ValuesCutShortCommand
from audit.quoting import quoted
from audit.redaction import redact_text
from runs.definitions.definition import registry
from runs.management.tables import render_table
from runs.operator.drill_approvals import approvals_said, last_run_id
from runs.operator.drill_batches import new_batch
from runs.operator.drills import approval_path, run_drills
from runs.operator.sandbox_check import sandbox_answers


def sandbox_candidates() -> list[tuple[str, str]]:
    """Where the drills may find the demo's sandbox, each with where it came from, in the
    order they are tried: SANDBOX_BASE_URL alone when it is set in the environment; else the
    running demo's (bin/demo writes its port to VAR_DIR/demo.port), then the setting's
    default."""
    if os.environ.get("SANDBOX_BASE_URL"):
        return [(settings.SANDBOX_BASE_URL, "SANDBOX_BASE_URL")]
    candidates = []
    port_file = Path(settings.VAR_DIR) / "demo.port"
    try:
        port = int(port_file.read_text().strip())
        candidates.append((f"http://127.0.0.1:{port}/sandbox",
                           f"the running demo's port in {port_file}"))
    except (OSError, ValueError):
        pass
    if settings.SANDBOX_BASE_URL not in [url for url, _ in candidates]:
        candidates.append((settings.SANDBOX_BASE_URL, "the SANDBOX_BASE_URL setting"))
    return candidates


class Command(ValuesCutShortCommand):
    help = ("Run the crash drills (1, 2, 5, 8 and, with compensation, 6; 7b for an approval "
            "step with a rule) against a registered workflow and print drill / expected / "
            "observed / pass, then who approved what the drill runs waited for. What a drill "
            "run waits for is carried through as the drill: approvals approved, events "
            "delivered with the default their wait declares, timers woken (an approval step "
            "whose rule lets the run through is passed by it, nobody asked; 7b drills the "
            "person it asks with the workflow's approval_example). Exits non-zero if one "
            "fails; a drill not exercised (its row says why: the workflow has no step of the "
            "kind it crashes at, or an event without a default, which no drill makes up, "
            "comes first) is no failure. "
            "Drill runs are flagged, kept out of the console's lists, notify nobody, and "
            "`manage.py remove_drill_runs` removes them.")

    def add_arguments(self, parser):
        parser.add_argument("workflow")
        parser.add_argument("--sandbox", default="",
                            help="the demo sandbox's URL (default: SANDBOX_BASE_URL, else the "
                                 "running `make demo`'s port, else "
                                 + redact_text(settings.SANDBOX_BASE_URL) + ")")

    def handle(self, *args, workflow, sandbox, **options):
        definition = registry.latest(workflow)
        if definition is None:
            raise CommandError(f"unknown workflow {quoted(workflow)}; registered: "
                               f"{', '.join(registry.names()) or 'none'}")
        if _calls_the_sandbox(definition):
            candidates = ([(sandbox.rstrip("/"), "--sandbox")] if sandbox
                          else sandbox_candidates())
            tried = []
            for url, source in candidates:
                problem = sandbox_answers(url)
                if problem is None:
                    break
                # Masked before it is cut: a cut could leave part of a password unmasked.
                tried.append(f"{quoted(redact_text(url))} (from {source}): {problem}")
            else:
                # A URL may carry a password (http://user:password@host/sandbox).
                raise CommandError(redact_text(
                    "no demo sandbox answers; tried " + "; ".join(tried) + ". Start the demo "
                    "(make demo, or PORT=... make demo), or point the drills at its sandbox "
                    "with --sandbox http://127.0.0.1:PORT/sandbox or SANDBOX_BASE_URL=..."))
            settings.SANDBOX_BASE_URL = url
            # The sandbox's model, whatever MODEL_BASE_URL says: a deployment sets it to the
            # model its real work asks, which no drill may call.
            settings.MODEL_BASE_URL = f"{url}/model/v1"
            self.stdout.write(redact_text(f"sandbox: {url} (from {source}); model: "
                                          f"{settings.MODEL_BASE_URL}"))
        before, batch = last_run_id(), new_batch()
        try:
            results = run_drills(definition, batch=batch)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        except Exception as exc:  # what no drill row could hold: a message, not a traceback
            raise CommandError(redact_text(f"the drills stopped: {type(exc).__name__}: {exc}")) \
                from None
        rows = [(r.drill, r.expected, r.observed, _verdict(r)) for r in results]
        self.stdout.write(f"drills for {definition.name} v{definition.version}")
        self.stdout.write(render_table(("drill", "expected", "observed", "pass"), rows))
        # What the drill runs came to, not only how the drill would approve: an approval
        # step's rule may have let every one of them through, nobody asked.
        self.stdout.write("approvals: " + approvals_said(definition, after=before, batch=batch,
                                                         path=approval_path()))
        self.stdout.write("drill runs are left out of the console's lists (tick 'Drill runs "
                          "too' to see them); remove them with: manage.py remove_drill_runs")
        unexercised = [r.drill for r in results if not r.exercised]
        if unexercised:
            self.stdout.write(f"{len(unexercised)} drill(s) not exercised (no failure; the "
                              f"row says why): {'; '.join(unexercised)}")
        failed = [r.drill for r in results if r.passed is False]
        if failed:
            raise CommandError(f"{len(failed)} drill(s) failed: {'; '.join(failed)}")
        self.stdout.write("all applicable drills passed"
                          + (" that could be exercised" if unexercised else ""))


def _verdict(result) -> str:
    if not result.exercised:
        return "not exercised"
    return "n/a" if result.passed is None else ("PASS" if result.passed else "FAIL")


def _calls_the_sandbox(definition) -> bool:
    # The demo's workflows call the simulated systems; a user's own workflows do not. Whether
    # this deployment serves the sandbox (SANDBOX_ENABLED) does not matter: the demo's clients
    # send to SANDBOX_BASE_URL either way, so it must be the sandbox before any drill starts.
    return any(getattr(step.fn, "__module__", "").startswith("demo.")
               for step in definition.steps)
