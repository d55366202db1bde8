"""make bench's verdict on a target reads every round: it says met or MISSED only when all
rounds agree, so it does not flip between two runs of the bench with the noise of one."""

from runs.bench_processes import verdict_over_rounds


def test_a_target_every_round_meets_is_met_and_one_none_meets_is_missed():
    assert verdict_over_rounds([0.31, 0.35, 0.33], 0.3, at_least=True) == "met"
    assert verdict_over_rounds([0.21, 0.25, 0.29], 0.3, at_least=True) == "MISSED"
    assert verdict_over_rounds([2.1, 2.9, 3.0], 3) == "met"
    assert verdict_over_rounds([3.1, 4.0], 3) == "MISSED"


def test_rounds_on_both_sides_of_the_target_are_named_not_decided_by_the_median():
    # The median (0.31) is above the target; two rounds of five are below it.
    verdict = verdict_over_rounds([0.28, 0.31, 0.33, 0.29, 0.35], 0.3, at_least=True)
    assert verdict == "met in 3 of 5 rounds: within the noise"


def test_a_figure_a_round_could_not_measure_has_no_verdict():
    assert verdict_over_rounds([0.2, None, 0.25], 0.3) == "n/a"
    assert verdict_over_rounds([], 0.3) == "n/a"
