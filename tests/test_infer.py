"""How `workbench.infer` times a compiled model."""
from workbench.infer import repeats_for


def test_inference_timing_fits_its_budget_but_keeps_a_few_repeats():
    """A model that takes seconds per inference (TVM's untuned build on a CPU) is timed as often as fits
    10 s, but at least 5 times; a fast one gets the 15 repeats asked for."""
    assert repeats_for(30.0, 15, 50, 10.0) == 15  # 50 ms per repeat: 200 would fit
    assert repeats_for(2400.0, 15, 50, 10.0) == 5  # 4 would fit: the floor of 5
    assert repeats_for(900.0, 15, 50, 10.0) == 11
    assert repeats_for(5.0, 3, 20, 10.0) == 3  # never more than asked
