"""The effect machine and the transitions: every change of a run's or a step's
state (the transitions package, the only code that writes them), and what an effect goes
through on its way (the idempotency key, the intent and outcome checkpoints and their one-statement
form, error classes, the lookup by key, the database clock that judges leases, crash points,
redaction and encryption of what is stored, bounded results, dispatch pauses, limits and wake-up
hints). Agents, the executor and the operator's actions drive it only through the transitions'
public functions.
"""
