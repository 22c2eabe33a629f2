"""The forecast of make on more cores: list scheduling of the measured runs, everything else kept as measured."""
import pytest

from machinery import forecast


def test_a_batch_spans_what_its_workers_need_in_the_order_the_runs_came():
    assert forecast.span([10, 10, 10, 10], 2) == 20
    assert forecast.span([10, 10, 10, 10], 4) == 10 and forecast.span([10, 10, 10, 10], 8) == 10
    assert forecast.span([30, 10, 10, 10], 2) == 30  # the long run on one worker, the three short on the other
    assert forecast.span([], 4) == 0.0
    with pytest.raises(ValueError, match='workers must be >= 1'):
        forecast.span([1], 0)


def test_the_forecast_replaces_only_the_batches_time():
    lines = [dict(batch='a', name=n, seconds=10.0, workers=2) for n in 'wxyz'] + \
            [dict(batch='b', name='init', seconds=5.0, workers=1)]
    # measured: 100 s in all, of which batch a took 20 s on 2 workers and batch b 5 s on 1
    assert forecast.forecast(lines, 100.0, 2) == 100.0
    assert forecast.forecast(lines, 100.0, 4) == 100.0 - 20 + 10
    assert forecast.forecast(lines, 100.0, 1) == 100.0 - 20 + 40
