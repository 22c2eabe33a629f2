"""The real model's task pilot: the base model on the training prompts of each level asked for, and the level
agentrl.realrl.pilot's rule picks among them. Each call is a round appended to results/real_pilot.json (earlier
rounds are kept); `make` never runs it.

    python -m machinery.real_pilot [--levels add1 code-arith ...]

The rule was committed before the first round ran. Timings are only meaningful on an otherwise idle machine: each round
notes the CPU and the load average at its start.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

from agentrl.atomic import atomic_output
from agentrl.paths import REPO
from agentrl.pretrained.loader import load_smollm2
from agentrl.realrl import pilot
from agentrl.realrl.tasks import LEVELS
from agentrl.substrate.sandbox import Sandbox
from machinery.substrate_sweep import cpu_name

RECORD = REPO / 'results' / 'real_pilot.json'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--levels', nargs='+', default=list(LEVELS), choices=list(LEVELS))
    args = parser.parse_args(argv)
    commit = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=REPO, capture_output=True, text=True).stdout.strip()
    pretrained = load_smollm2()
    sandbox = Sandbox()
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')
    load = os.getloadavg()[0]
    pilots = []
    for level in args.levels:
        result = pilot.pilot_level(pretrained, level, sandbox)
        pilots.append(result)
        print(f'{level}: pass@1 {result.pass1:.3f}, flat {result.flat_share:.2f}, projected step '
              f'{result.step_seconds:.1f} s, qualifies {result.qualifies}', flush=True)
    sandbox.close()
    rounds = json.loads(RECORD.read_text())['rounds'] if RECORD.exists() else []
    record = dict(commit=commit, cpu=cpu_name(), started=started, load_at_start=round(load, 2),
                  rule=dict(pass_band=list(pilot.PASS_BAND), max_flat_share=pilot.MAX_FLAT_SHARE,
                            prompts=pilot.PILOT_PROMPTS, group=pilot.PILOT_GROUP, seed=pilot.PILOT_SEED,
                            run_steps=pilot.RUN_STEPS, run_seconds=pilot.RUN_SECONDS,
                            step_replies=pilot.STEP_REPLIES, updates_per_step=pilot.UPDATES_PER_STEP),
                  levels=[p.as_dict() for p in pilots], chosen=pilot.choose(pilots))
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(RECORD, suffix='.json') as tmp:
        tmp.write_text(json.dumps(dict(rounds=rounds + [record]), indent=1, sort_keys=True) + '\n')
    print(f'round {len(rounds) + 1}, chosen: {record["chosen"]}; written {RECORD.relative_to(REPO)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
