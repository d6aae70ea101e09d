"""Tests of the maintained bench tools (`bench.NAME`); none reads bench/results."""
