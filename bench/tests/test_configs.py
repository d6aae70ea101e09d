"""Bench config names: what each suffix asks of the engine, and that no suffix asks the product's defaults."""
import pytest

from bench.tuning_throughput import parse_config
from workbench.options import EngineOptions


def test_a_config_without_engine_suffixes_builds_as_the_product_does() -> None:
    plain = parse_config("1x1@100+batch")
    assert (plain["runner"], plain["builder"], plain["first_round"]) == ("rpc-batch", "auto", "auto")
    assert plain["builder"] == EngineOptions().builder
    assert parse_config("2x1@50+batch+cut")["builder"] == "persistent-cut"
    waits = parse_config("4x2@50/2gpu+rand+batch-full+wait+lean+dask")
    assert (waits["builder"], waits["runner"], waits["first_round"], waits["strategy"], waits["gpus"],
            waits["cluster"]) == ("persistent", "rpc-batch-full", "random", "evolutionary-lean", 2, "local")
    with pytest.raises(SystemExit, match=r"\+cut\|\+wait"):
        parse_config("1x1@100+cut+wait")


def test_the_few_samples_search_is_the_lean_evolution_from_16_initial_samples() -> None:
    from workbench.tuning import search_strategy as strategies

    assert parse_config("1x1@100+batch+few")["strategy"] == "evolutionary-lean-few"
    few, lean = strategies.create("evolutionary-lean-few"), strategies.create("evolutionary-lean")
    assert (few.population_size, few.genetic_num_iters, few.init_min_unmeasured) == (128, 2, 16)
    assert (lean.population_size, lean.init_min_unmeasured) == (128, 50)  # TVM's default minimum
