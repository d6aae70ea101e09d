"""Search-strategy plug-ins: how a task's candidates are chosen. `create(name, first_round)` takes a name of
`workbench.options.STRATEGIES` (resolved: not "auto") or a MetaSchedule search strategy (returned as it is)."""
from __future__ import annotations

from typing import Any

from workbench.options import FIRST_ROUNDS, STRATEGIES, check

# "evolutionary-lean": TVM's evolution with a quarter of its population (512 -> 128) and half its generations
# (4 -> 2). Search is most of a trial's cost, and XGB scores at random for its first 100 samples, so early on most of
# that search buys nothing. The default at fp16 on a GPU (`options.strategy_for`), where it was measured better at
# equal time; at fp32 on a GPU it kept slower models, and on CPUs it split two models (docs/benchmarks.md).
LEAN_SEARCH = {"population_size": 128, "genetic_num_iters": 2}
# "evolutionary-lean-few": that, sampling its initial population until 16 random schedules pass the checks, not 50
# (`init_min_unmeasured`). On CUDA few samples pass, so that sampling is most of the lean search and does not shrink
# with the population (docs/benchmarks.md: the first batch by step). Its effect on the models is not measured.
FEW_SAMPLES = {**LEAN_SEARCH, "init_min_unmeasured": 16}


def create(name: Any, first_round: str = "evolutionary", related: dict[str, list[Any]] | None = None,
           budget: Any = None, on_failure: Any = None) -> Any:
    """The search strategy a client tunes with: TVM's (by name), its lean variant, or either evolution with a
    random first round (`RandomFirstRound`, where `first_round` is "random"); where `related` holds traces for some
    workloads ({workload hash: traces}, `tuning.transfer`), wrapped so that their first batch re-applies them
    (`FromRelated`); where `budget` is a `budgeted.ShardBudget`, held to it exactly (`Budgeted`); where
    `on_failure(task, reason)` is given, a task whose search raises stops alone and is reported (`Guarded`)."""
    if on_failure is not None:
        from workbench.tuning.search_strategy.guarded import Guarded

        return Guarded(create(name, first_round, related, budget), on_failure)
    if budget is not None:
        from workbench.tuning.search_strategy.budgeted import Budgeted

        return Budgeted(create(name, first_round, related), budget)
    if related:
        from workbench.tuning.search_strategy.from_related import FromRelated

        return FromRelated(create(name, first_round), related)
    if not isinstance(name, str):
        return name
    check("strategy", name, STRATEGIES)
    check("first_round", first_round, FIRST_ROUNDS)
    if name.endswith("-neighbours"):
        from workbench.tuning.search_strategy.neighbours import Neighbours

        return Neighbours(create(name.removesuffix("-neighbours"), first_round))
    kwargs = {"evolutionary-lean": LEAN_SEARCH, "evolutionary-lean-few": FEW_SAMPLES}.get(name, {})
    if name.startswith("evolutionary") and first_round == "random":
        from workbench.tuning.search_strategy.random_first_round import RandomFirstRound

        return RandomFirstRound(**kwargs)
    if kwargs:
        from tvm.s_tir import meta_schedule as ms

        return ms.search_strategy.EvolutionarySearch(**kwargs)
    return name
