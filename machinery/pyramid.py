"""The test pyramid: how many tests each layer of the project has, counted from pytest's own collection.

Usage: python -m machinery.pyramid [--write]
prints MAINTAINING.md's table (fast behavioural, slow behavioural and slow snapshot tests per layer); --write puts it
into MAINTAINING.md between PYRAMID_BEGIN and PYRAMID_END (`make pyramid`). tests/test_pyramid.py keeps the two equal.
Every test file belongs to exactly one layer of LAYERS; a file that belongs to none stops the count.
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from machinery.readme_blocks import between_markers, replace_between_markers, write_text
from agentrl.paths import MAINTAINING, REPO

TESTS = REPO / 'tests'
PYRAMID_BEGIN = '<!-- pyramid: begin (written by `make pyramid` from pytest\'s collection; do not edit by hand) -->'
PYRAMID_END = '<!-- pyramid: end -->'

# (layer, what it covers, its test files): each file is counted in the layer of the code it mostly tests.
LAYERS = (
    ('math core', '`agentrl/core`', ('test_math_core.py', 'test_math_properties.py', 'test_off_policy.py')),
    ('substrate', '`agentrl/substrate`: tokenizer, gym, sandbox, model, sampling, GRPO, RL base',
     ('test_tokenizer.py', 'test_gym.py', 'test_extra_families.py', 'test_sandbox.py', 'test_model.py',
      'test_rollout.py', 'test_grpo.py', 'test_no_signal.py', 'test_bad_inputs.py', 'test_rl_base_cache.py',
      'test_substrate_config.py', 'test_substrate_end_to_end.py', 'test_mutation_kills.py')),
    ('chapter 10', '`agentrl/ch10`: plug-ins, runs, claims, the entropy law, claims across substrates, the '
                   'frameworks\' options',
     ('test_mechanisms.py', 'test_covariance_regularisers.py', 'test_runs.py', 'test_live.py', 'test_claims.py',
      'test_entropy_law.py', 'test_substrate_sweep.py', 'test_framework_options.py', 'test_framework_map.py',
      'test_framework_executed.py', 'test_framework_plugins.py', 'test_framework_claims.py', 'test_stability.py', 'test_ties.py', 'test_tie_rule.py',
      'test_turn_cost_ablation.py', 'test_clip_higher.py', 'test_findings_text.py', 'test_collapse_text.py',
      'test_design_text.py', 'test_exercise_text.py', 'test_substrate_text.py', 'test_framework_text.py',
      'test_entropy_law_report.py', 'test_covariance_report.py', 'test_seed_tables.py', 'test_glance.py',
      'test_seed_means.py')),
    ('pretrained model', '`agentrl/pretrained` and `agentrl/realrl`: the SmolLM2 loader and its checks, real pairs, '
                         'exact moments and gradients, 10.6 and the entropy bonus on a real vocabulary; the real '
                         "model's tasks, rewards, pilot, GRPO adapter, claim rules and sweep",
     ('test_pretrained_loader.py', 'test_pretrained_estimators.py', 'test_pretrained_covariance.py',
      'test_pretrained_bonus.py', 'test_realrl_tasks.py', 'test_realrl_engine.py', 'test_realrl_prefix.py',
      'test_realrl_claims.py', 'test_realrl_findings.py', 'test_realrl_report.py', 'test_realrl_live.py',
      'test_real_sweep.py')),
    ('notebooks and documents', 'the notebooks, README, MAINTAINING.md, REPRODUCTION.md, the site',
     ('test_notebooks.py', 'test_reader_view.py', 'test_save_cells.py', 'test_display.py', 'test_side_runs.py',
      'test_site.py', 'test_pyramid.py', 'test_markdown_tables.py', 'test_verdicts.py', 'test_front_door.py')),
    ('machinery', '`machinery/` runner and calibration, caches, stopping on signals, CPU pin and arithmetic '
                  'probe, sweeps on an executor (Dask), import layers, the frameworks\' code run beside ours',
     ('test_notebook_runner.py', 'test_forecast.py', 'test_calibrate.py', 'test_differences.py', 'test_search.py', 'test_verified_cache.py',
      'test_cpu_pin.py',
      'test_layers.py', 'test_mutation_report.py', 'test_stopping.py', 'test_speed_tools.py',
      'test_sweeps_on_dask.py', 'test_arithmetic.py', 'test_sweep_records.py', 'test_make_clock.py',
      'test_differential.py')),
)
KINDS = ('fast', 'slow', 'snapshot')  # unmarked; marked slow only; marked snapshot (always also slow)


class _Collector:
    """A pytest plugin that writes each collected test's file and markers to a JSON file."""

    def __init__(self, out):
        self.out = out

    def pytest_collection_finish(self, session):
        items = [{'file': Path(str(item.path)).name, 'id': item.nodeid,
                  'marks': sorted({mark.name for mark in item.iter_markers()} & {'slow', 'snapshot'})}
                 for item in session.items]
        Path(self.out).write_text(json.dumps(items), encoding='utf-8')


def collected():
    """[{'file', 'id', 'marks'}] of every test pytest collects in tests/ (in a fresh process, nothing executed)."""
    with tempfile.TemporaryDirectory(prefix='agentrl-pyramid-') as folder:
        out = Path(folder) / 'items.json'
        code = ('import sys, pytest\nfrom machinery.pyramid import _Collector\n'
                f'sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", {str(TESTS)!r}], '
                f'plugins=[_Collector({str(out)!r})]))')
        done = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0 or not out.is_file():
            raise RuntimeError(f'pytest could not collect the tests (exit {done.returncode}):\n{done.stdout[-2000:]}')
        return json.loads(out.read_text(encoding='utf-8'))


def kind(item):
    """'snapshot', 'slow' or 'fast'; a snapshot test not marked slow raises (make test-fast would run it)."""
    if 'snapshot' in item['marks']:
        if 'slow' not in item['marks']:
            raise ValueError(f'{item["id"]} is marked snapshot but not slow; a snapshot test executes notebooks, '
                             f'so it must be marked slow too')
        return 'snapshot'
    return 'slow' if 'slow' in item['marks'] else 'fast'


def counts(items):
    """{layer: {kind: number of tests}}; a test file in no layer, or in two, raises naming it."""
    layer_of = {}
    for layer, _, files in LAYERS:
        for name in files:
            if name in layer_of:
                raise ValueError(f'{name} is in two layers, {layer_of[name]} and {layer}; give it one')
            layer_of[name] = layer
    found = {layer: dict.fromkeys(KINDS, 0) for layer, _, _ in LAYERS}
    unplaced = sorted({item['file'] for item in items} - set(layer_of))
    if unplaced:
        raise ValueError(f'tests in no layer: {", ".join(unplaced)}; add each to one of LAYERS in '
                         f'machinery/pyramid.py ({", ".join(found)})')
    for item in items:
        found[layer_of[item['file']]][kind(item)] += 1
    return found


def table(found):
    """MAINTAINING.md's table, as Markdown lines."""
    lines = ['| layer | what it tests | fast: behaviour (correctness) | slow: behaviour | '
             'slow: snapshot (reproducibility) | all |', '|---|---|---|---|---|---|']
    for layer, covers, _ in LAYERS:
        row = found[layer]
        lines.append(f'| {layer} | {covers} | {row["fast"]} | {row["slow"]} | {row["snapshot"]} | '
                     f'{sum(row.values())} |')
    total = {k: sum(found[layer][k] for layer in found) for k in KINDS}
    lines.append(f'| **all** | | **{total["fast"]}** | **{total["slow"]}** | **{total["snapshot"]}** | '
                 f'**{sum(total.values())}** |')
    return lines


def readme_block(readme_text):
    """The lines between MAINTAINING.md's pyramid markers; missing markers raise."""
    lines = between_markers(readme_text, PYRAMID_BEGIN, PYRAMID_END)
    if lines is None:
        raise ValueError(f'MAINTAINING.md lacks the markers {PYRAMID_BEGIN!r} ... {PYRAMID_END!r} around the '
                         'test table')
    return lines


def with_table(readme_text, lines):
    """readme_text with the block between its pyramid markers replaced by lines."""
    readme_block(readme_text)  # the markers must be there
    return replace_between_markers(readme_text, PYRAMID_BEGIN, PYRAMID_END, lines)


def main(argv=None):
    """Command-line entry: print the table, or write it into MAINTAINING.md (--write)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--write', action='store_true', help='write the table into MAINTAINING.md between its markers')
    args = parser.parse_args(argv)
    lines = table(counts(collected()))
    if args.write:
        write_text(MAINTAINING, with_table(MAINTAINING.read_text(encoding='utf-8'), lines))
        print(f'wrote the test table into {MAINTAINING}')
    else:
        print('\n'.join(lines))
    return 0


if __name__ == '__main__':
    sys.exit(main())
