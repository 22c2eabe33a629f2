"""Notebook 08's tables and sentences (section 10.8's four design problems), written from the runs it loads.

The printed lines keep the book's layout; every comparison sentence calls two numbers tied by agentrl.ch10.ties,
with a tolerance from the spread of the same quantity over the five training seeds (one draw against one draw).
"""
import html
import re

from agentrl import chapter, results
from agentrl.ch10 import across, claims, ties

SEEDS = (0, 1, 2, 3, 4)
CHECKPOINTS = (0, 5, 10, 20, 39)  # the steps the book samples from each run's log
COLLAPSE_SETTINGS = ('none', 'KL k3+ 0.3', 'entropy 0.03')
KL_SETTINGS = ('KL k3+ 0.05', 'KL k3+ 0.3', 'KL k3+ 1.0')
KL_STEPS = (0, 10, 20, 39)
KEEP, RESET = claims.RESET_RUNS
NO_READING_BELOW = 0.8  # reads per episode at the last step: the threshold of the claim 'kl-1.0-no-reading'

# The claims of claims.py that section 10.8's problems rest on, by problem (the reference's cost has none).
PROBLEM_CLAIMS = {'collapse': ('collapse', 'bonus-slows-collapse'),
                  'kl': ('kl-1.0-no-reading', 'kl-1.0-holds-entropy', 'kl-costs-pass1'),
                  'reset': ('reset-lowers-kl', 'reset-lowers-entropy')}

# Reference memory: bytes per trained parameter (bf16 weights and gradients, fp32 master weights and Adam moments).
TRAINED_BYTES = dict(weights_bf16=2, grads_bf16=2, master_fp32=4, adam_moments_fp32=8)
REFERENCE_BYTES = 2  # the reference holds bf16 weights and nothing else
# trainer work per step in forward-pass units: log-probs of pi_old 1, forward 1, backward about 2; a reference adds 1
EXTRA_COMPUTE = 1 / (1 + 1 + 2)
MODEL_SIZES = {'0.6B': 0.6e9, '8B': 8e9, '32B': 32e9}
GIB = 2 ** 30


# --- the runs -------------------------------------------------------------------------------------------------

def reset_specs(seed):
    """The two 20-step continuations of seed's KL k3+ 0.3 run (anchored at the RL base, or reset) -> [RunSpec]."""
    specs = across.claim_specs(seed)
    return [specs[name] for name in claims.RESET_RUNS]


def seed_specs(seeds=SEEDS):
    """The nine 10.7 settings and the two continuations on every seed, named '<name> | seed <s>' -> [RunSpec]."""
    wanted = set(claims.CHAPTER_ARMS + claims.RESET_RUNS)
    return [spec for spec in across.seed_specs(seeds) if spec.name.rsplit(' | seed ', 1)[0] in wanted]


def seed_verdicts(runs_by_seed, seeds=SEEDS):
    """claims.seed_verdict of every claim 10.8's problems rest on -> [dict], in PROBLEM_CLAIMS order."""
    keys = [key for group in PROBLEM_CLAIMS.values() for key in group]
    return [claims.seed_verdict(claims.by_key(key), runs_by_seed, seeds) for key in keys]


# --- measurements ---------------------------------------------------------------------------------------------

def last_five(history, key):
    """Mean of a logged quantity over the last five steps."""
    return sum(step[key] for step in history[-5:]) / 5


def window(values, start, stop):
    """Mean of values[start:stop]."""
    return sum(values[start:stop]) / (stop - start)


def logged(run, key):
    """One logged quantity of every step of a run -> list."""
    return [step[key] for step in run['history']]


def _at(step, key):
    return lambda run: run['history'][step][key]


# Each tolerance: (what it compares, {label: (setting, measure)}); the replicates are those values on every seed.
QUANTITIES = {
    'reward10': ('batch reward at step 10', {name: (name, _at(10, 'reward')) for name in COLLAPSE_SETTINGS}),
    'entropy20': ('entropy at step 20', {name: (name, _at(20, 'entropy')) for name in COLLAPSE_SETTINGS}),
    'reward39': ('batch reward at step 39', {name: (name, _at(39, 'reward')) for name in COLLAPSE_SETTINGS}),
    'weak_vs_start': ('KL k3+ 0.05 at step 20 against the unregularised KL from the start',
                      {'at 20': ('KL k3+ 0.05', _at(20, 'kl_ref')),
                       'from start': ('none', lambda run: run['metrics']['kl_start'])}),
    'kl_start': ('held-out KL from the start', {name: (name, lambda run: run['metrics']['kl_start'])
                                                for name in ('none', 'KL k3+ 0.05')}),
    'weak_kl': ('KL k3+ 0.05 KL to the reference at one step', {s: ('KL k3+ 0.05', _at(s, 'kl_ref')) for s in (20, 39)}),
    'kl_window': ('KL k3+ 0.3 KL to the reference, five-step mean',
                  {w: ('KL k3+ 0.3', lambda run, w=w: window(logged(run, 'kl_ref'), w, w + 5)) for w in (16, 35)}),
    'kl_last5': ('KL to the reference over the last five steps',
                 {name: (name, lambda run: last_five(run['history'], 'kl_ref')) for name in ('KL k3+ 0.3', KEEP, RESET)}),
    'entropy_last5': ('entropy over the last five steps',
                      {name: (name, lambda run: last_five(run['history'], 'entropy')) for name in (KEEP, RESET)}),
    'pass1': ('held-out pass@1', {name: (name, lambda run: run['metrics']['pass1']) for name in (KEEP, RESET)}),
    'distinct': ('distinct action sequences per task',
                 {name: (name, lambda run: run['metrics']['distinct']) for name in (KEEP, RESET)}),
}


def replicates(key, runs_by_seed):
    """{label: [value on each seed]} of one quantity."""
    return {label: [measure(runs[setting]) for runs in runs_by_seed]
            for label, (setting, measure) in QUANTITIES[key][1].items()}


def tolerances(runs_by_seed):
    """{quantity key: the tie tolerance between one draw and another}, from the spread over the seeds."""
    return {key: ties.tolerance(replicates(key, runs_by_seed), 1) for key in QUANTITIES}


def tolerance_table(tols, n_seeds):
    """The rule once, and the tolerance of every quantity the sentences below compare -> Markdown."""
    rows = '\n'.join(f'| {QUANTITIES[key][0]} | {tol:.3f} |' for key, tol in tols.items())
    return (f'Two numbers below are called **tied** when they differ by less than {ties.Z:g} standard errors of a '
            f'difference between two single runs, the standard error taken from the spread of the same quantity over '
            f'{n_seeds} training seeds (agentrl/ch10/ties.py). The book\'s numbers are held to the same tolerance.'
            f'\n\n| quantity compared | tied below |\n|---|---|\n{rows}')


# --- the printed blocks, in the book's layout -------------------------------------------------------------------

def book_block(index):
    """The book's printed lines of 10.8's block `index` (data/book/chapter10.json)."""
    return chapter.blocks_of('10.8')[index].lines


def numbers_after(line, label):
    """The numbers that follow `label` in a printed line, up to the next ' | ' -> list of floats."""
    part = line.split(label, 1)[1].split(' | ')[0]
    return [float(x) for x in re.findall(r'\d+(?:\.\d+)?', part)]


def book_row(index, name):
    """The line of setting `name` in the book's block `index`."""
    return next(line for line in book_block(index) if line.split(' | ')[0].strip() == name)


def trajectory_line(name, run):
    """Entropy H and batch reward r of one setting at the checkpoint steps, in the book's layout."""
    log = run['history']
    points = [f'step {s:2d}: H {log[s]["entropy"]:.2f} r {log[s]["reward"]:.2f}' for s in CHECKPOINTS]
    return ' | '.join([f'{name:<13}', *points])


def kl_log_line(name, run):
    """The logged KL to the reference at steps 0, 10, 20 and 39, reads at the last step, held-out pass@1."""
    log, held_out = run['history'], run['metrics']
    sampled = ' '.join(f'{log[s]["kl_ref"]:.4f}' for s in KL_STEPS)
    return (f'{name:<12} | KL to reference at steps 0, 10, 20, 39: {sampled} | reads {log[-1]["reads"]:.2f}'
            f' | pass@1 {held_out["pass1"]:.3f}')


def memory_lines(tiny):
    """TinyAgent's parameter count, then the policy's training state against the reference's weights per size."""
    trained = sum(TRAINED_BYTES.values())
    return [f'TinyAgent: {tiny:,} parameters'] + [
        f'{label:>4} model | policy training state {trained * n / GIB:5.0f} GiB | reference weights'
        f' {REFERENCE_BYTES * n / GIB:4.0f} GiB (+{REFERENCE_BYTES / trained:.1%}) | trainer compute per step'
        f' +{EXTRA_COMPUTE:.0%}' for label, n in MODEL_SIZES.items()]


def reset_line(name, run):
    """A continuation's KL to its reference and entropy over its last five steps, and its held-out metrics."""
    log, held_out = run['history'], run['metrics']
    return (f'{name:<28} | KL to reference {last_five(log, "kl_ref"):.3f} | entropy {last_five(log, "entropy"):.3f}'
            f' | pass@1 {held_out["pass1"]:.3f} | pass@8 {held_out["pass8"]:.3f} | distinct {held_out["distinct"]:.1f}')


def beside_html(book_lines, our_lines, ours_label):
    """The book's printed lines and ours interleaved row by row in one table, cells split at ' | ' -> HTML."""
    rows = [(who, line.split(' | ')) for pair in zip(book_lines, our_lines)
            for who, line in zip(('book', ours_label), pair)]
    width = max(len(cells) for _, cells in rows)

    def cell(text, span=1, tag='td'):
        return f'<{tag} colspan="{span}" style="text-align:left">{html.escape(text.strip())}</{tag}>'

    body = ''.join('<tr>' + cell(who, tag='th') + ''.join(map(cell, cells[:-1])) + cell(cells[-1], width - len(cells) + 1)
                   + '</tr>' for who, cells in rows)
    return f'<table>{body}</table>'


def show_beside(notebook, key, our_lines, book_lines, ours_label='ours, seed 0'):
    """Record our lines under key (as prose.show_wide does) and display them interleaved with the book's."""
    from IPython.display import display  # a notebook's kernel has IPython; the package loads without it

    results.record(notebook, key, our_lines)
    display({'text/plain': '\n'.join(our_lines), 'text/html': beside_html(book_lines, our_lines, ours_label)},
            raw=True)


# --- the readings under each block ------------------------------------------------------------------------------

PLACE = {ties.HIGHER: 'above', ties.LOWER: 'below', ties.TIED: 'tied with'}


def book_trajectory(name):
    """{step: (H, r)} of one setting in the book's printed log."""
    points = {}
    for part in book_row(0, name).split(' | ')[1:]:
        step, h, r = re.match(r'step\s+(\d+): H ([\d.]+) r ([\d.]+)', part).groups()
        points[int(step)] = (float(h), float(r))
    return points


def book_kl(name):
    """(KL at steps 0, 10, 20, 39, reads, pass@1) of one setting in the book's printed KL log."""
    line = book_row(1, name)
    return (numbers_after(line, 'steps 0, 10, 20, 39:'), numbers_after(line, 'reads')[0],
            numbers_after(line, 'pass@1')[0])


def book_reset(name, label):
    """One number of a continuation in the book's printed reset block."""
    return numbers_after(book_row(3, name), label)[0]


def collapse_reading(draw, tols):
    """Problem 1: when our entropy halves, and where the remedies leave entropy and reward, beside the book."""
    log = draw['none']['history']
    ours = {name: {s: (draw[name]['history'][s]['entropy'], draw[name]['history'][s]['reward']) for s in CHECKPOINTS}
            for name in COLLAPSE_SETTINGS}
    book = {name: book_trajectory(name) for name in COLLAPSE_SETTINGS}
    halved = next((s for s, step in enumerate(log) if step['entropy'] <= log[0]['entropy'] / 2), None)
    text = [f'Without regularisation our entropy never falls to half its start ({log[0]["entropy"]:.2f}) in the '
            f'{len(log)} steps.' if halved is None else
            f'Without regularisation our entropy halves (from {log[0]["entropy"]:.2f}) by step {halved}, when the '
            f'batch reward is already {log[halved]["reward"]:.2f}.']
    (h10, r10), (bh10, br10) = ours['none'][10], book['none'][10]
    pace = ties.compare(r10, br10, tols['reward10'])
    text.append(f"At step 10 our run is at H {h10:.2f} with r {r10:.2f}, the book's at H {bh10:.2f} with r {br10:.2f}: "
                + {ties.HIGHER: 'ours learns faster, so here the entropy falls while the reward climbs.',
                   ties.LOWER: 'our reward is behind the book\'s at this point.',
                   ties.TIED: 'the two rewards are tied.'}[pace])
    remedies = [('the KL penalty', 'KL k3+ 0.3'), ('the entropy bonus', 'entropy 0.03')]
    ours20 = {label: PLACE[ties.compare(ours[name][20][0], ours['none'][20][0], tols['entropy20'])]
              for label, name in remedies}
    book20 = {label: PLACE[ties.compare(book[name][20][0], book['none'][20][0], tols['entropy20'])]
              for label, name in remedies}
    text.append(f'At step 20 the entropy is {ours["KL k3+ 0.3"][20][0]:.2f} with the KL penalty and '
                f'{ours["entropy 0.03"][20][0]:.2f} with the bonus, against {ours["none"][20][0]:.2f} without '
                f'regularisation (book: {book["KL k3+ 0.3"][20][0]:.2f} and {book["entropy 0.03"][20][0]:.2f} against '
                f'{book["none"][20][0]:.2f}): ' + _remedies_place(ours20, 'ours') + '; ' + _remedies_place(book20, 'the book') + '.')
    end = {name: ours[name][39] for name in COLLAPSE_SETTINGS}
    book_end = {name: book[name][39] for name in COLLAPSE_SETTINGS}
    words = {who: {name: PLACE[ties.compare(values[name][1], values['none'][1], tols['reward39'])]
                   for name in COLLAPSE_SETTINGS[1:]} for who, values in (('ours', end), ('book', book_end))}
    text.append(f'At step 39 the batch reward is {end["none"][1]:.2f} without regularisation, '
                f'{end["KL k3+ 0.3"][1]:.2f} with the KL penalty and {end["entropy 0.03"][1]:.2f} with the bonus (book: '
                f'{book_end["none"][1]:.2f}, {book_end["KL k3+ 0.3"][1]:.2f}, {book_end["entropy 0.03"][1]:.2f}). In the '
                f'book the KL run ends {words["book"]["KL k3+ 0.3"]} the unregularised run and the bonus run '
                f'{words["book"]["entropy 0.03"]} it; here the KL run ends {words["ours"]["KL k3+ 0.3"]} it and the bonus '
                f'run {words["ours"]["entropy 0.03"]} it.')
    text.append(f'The entropies at step 39 are {end["none"][0]:.2f}, {end["KL k3+ 0.3"][0]:.2f} and '
                f'{end["entropy 0.03"][0]:.2f} (book: {book_end["none"][0]:.2f}, {book_end["KL k3+ 0.3"][0]:.2f}, '
                f'{book_end["entropy 0.03"][0]:.2f}).')
    return ' '.join(text)


def _remedies_place(places, whose):
    """'in ours the KL penalty is tied with the unregularised run and the entropy bonus above it'."""
    (first, w1), (second, w2) = places.items()
    return f'in {whose} {first} is {w1} the unregularised run and {second} {w2} it'.replace('tied with it', 'tied too')


KL_READING = {ties.TIED: 'the two are tied, meaning the term changed little',
              ties.LOWER: 'it is below, meaning even this weak term keeps the training batches near the reference',
              ties.HIGHER: 'it is above the distance without any penalty'}


def kl_reading(draw, tols):
    """Problem 2: the three k3+ coefficients' logged KL, reads and pass@1 read against the book's."""
    weak, middle, strong = (logged(draw[name], 'kl_ref') for name in KL_SETTINGS)
    (book_weak, _, _), (book_middle, _, _), (book_strong, book_reads, book_pass1) = map(book_kl, KL_SETTINGS)
    history = draw['none']['history']
    policy_tokens = sum(step['policy_tokens'] for step in history) / len(history)
    from_start = draw['none']['metrics']['kl_start']
    book_from_start = float(next(row for row in chapter.book_table_10_7()[1] if row['setting'] == 'none')
                            ['KL from start'])
    ours_close = ties.compare(weak[20], from_start, tols['weak_vs_start'])
    book_close = ties.compare(book_weak[2], book_from_start, tols['weak_vs_start'])
    text = [f'Our episodes carry about {policy_tokens:.0f} policy tokens on average, so here the two placements of '
            'the KL differ in scale by roughly that factor.']
    peak = max(range(len(weak)), key=weak.__getitem__)
    weak_from_start = draw['KL k3+ 0.05']['metrics']['kl_start']
    held_out = PLACE[ties.compare(weak_from_start, from_start, tols['kl_start'])]
    text.append(f'**β = 0.05.** The KL to the reference is {weak[20]:.3f} at step 20, against an unregularised final '
                f'distance from the start of {from_start:.3f} (the "KL from start" that notebook 07 tabulates, measured '
                f'on held-out episodes rather than training batches): {KL_READING[ours_close]}. The book has '
                f'{book_weak[2]:.3f} against {book_from_start:.3f}, '
                + ('the same reading.' if ours_close == book_close else f'which reads differently: '
                                                                         f'{KL_READING[book_close]}.')
                + (f' Our logged KL is not steady, though: it peaks at {weak[peak]:.3f} at step {peak}.'
                   if ties.compare(weak[peak], max(weak[20], weak[-1]), tols['weak_kl']) == ties.HIGHER else '')
                + f' On held-out episodes this run ends {weak_from_start:.3f} from the start, {held_out} the '
                  f'unregularised run\'s {from_start:.3f}.')
    reads_start, reads_end = history[0]['reads'], draw['KL k3+ 1.0']['history'][-1]['reads']
    text.append(f'**β = 1.0.** The KL never exceeds {max(strong):.3f} in the {len(strong)} steps (book: at most '
                f'{max(book_strong):.3f} at the four printed steps). The RL base reads the code {reads_start:.2f} times '
                f'per episode in its first batch; at the last step this run reads {reads_end:.2f} times and reaches a '
                f'held-out pass@1 of {draw["KL k3+ 1.0"]["metrics"]["pass1"]:.3f} (book: {book_reads:.2f} and '
                f'{book_pass1:.3f}), ' + ('so reading never becomes the habit, as in the book.'
                                         if reads_end < NO_READING_BELOW else
                                         'so reading does become the habit here, unlike in the book.'))
    early, late = window(middle, 16, 21), window(middle, 35, 40)
    reward = logged(draw['KL k3+ 0.3'], 'reward')
    trend = {ties.TIED: 'so it has levelled off (the two windows are tied)', ties.HIGHER: 'so it is still rising',
             ties.LOWER: 'so it is falling'}[ties.compare(late, early, tols['kl_window'])]
    text.append(f'**β = 0.3.** The KL averages {early:.3f} over steps 16-20 and {late:.3f} over steps 35-39, {trend}, '
                f'while the batch reward goes from {window(reward, 16, 21):.2f} to {window(reward, 35, 40):.2f} over '
                f'the same windows. The book describes its middle run as levelling off near 0.1 with the reward still '
                f'creeping up ({book_middle[2]:.4f} at step 20, {book_middle[3]:.4f} at step 39).')
    return '\n\n'.join(text)


def parameter_gap(tiny, embedding_dim):
    """(the book's parameter count, the gap to ours, parameters per vocabulary entry)."""
    book_tiny = int(book_block(2)[0].split(':')[1].split()[0].replace(',', ''))
    return book_tiny, book_tiny - tiny, 2 * embedding_dim + 1  # an embedding row, an output row, an output bias


def memory_reading(tiny, embedding_dim):
    """Problem 3: why the share is the same at every size, and our parameter count against the book's."""
    trained = sum(TRAINED_BYTES.values())
    book_tiny, gap, per_word = parameter_gap(tiny, embedding_dim)
    exact = gap > 0 and gap % per_word == 0
    return (f'The reference adds the same {REFERENCE_BYTES / trained:.1%} at every size because it holds '
            f'{REFERENCE_BYTES} bytes per parameter against the trained policy\'s {trained}. The absolute sizes are '
            f'what decide feasibility: for a 32B policy the reference\'s {REFERENCE_BYTES * MODEL_SIZES["32B"] / GIB:.0f} '
            'GiB must fit, next to the sharded training state, on every node that computes reference log-probs. '
            'Counting a backward pass as about two forwards, a step without a reference is four forward units '
            f'($\\pi_{{\\text{{old}}}}$, forward, backward) and the reference adds a fifth: {EXTRA_COMPUTE:.0%} more '
            f'trainer compute. Our TinyAgent has {tiny:,} parameters, the book\'s {book_tiny:,}'
            + (f'; the gap of {gap:,} is exactly {gap // per_word} vocabulary entries at {per_word} parameters each (an '
               'embedding row, an output row and a bias), which suggests the two tokenizers differ and the networks do '
               'not.' if exact else '.')
            + ' At this size the reference costs next to nothing, which is why every run in this chapter can afford '
              'one; at scale it needs a budget line of its own.')


def reset_reading(draw, tols):
    """Problem 4: the two continuations' KL, entropy and held-out metrics against the book's, ties called ties."""
    first, keep, reset = draw['KL k3+ 0.3']['history'], draw[KEEP], draw[RESET]
    before, after_keep = last_five(first, 'kl_ref'), last_five(keep['history'], 'kl_ref')
    after_reset = last_five(reset['history'], 'kl_ref')
    book_first, book_keep_kl, book_reset_kl = book_kl('KL k3+ 0.3')[0][3], book_reset(KEEP, 'KL to reference'), \
        book_reset(RESET, 'KL to reference')
    ours_trend = ties.compare(after_keep, before, tols['kl_last5'])
    book_trend = ties.compare(book_keep_kl, book_first, tols['kl_last5'])
    kept = {ties.HIGHER: f'did not stay where the first 40 steps left it: it grew from {before:.3f} to '
                         f'{after_keep:.3f} ({after_keep / before:.1f} times)',
            ties.LOWER: f'fell from {before:.3f} to {after_keep:.3f}',
            ties.TIED: f'stayed where the first 40 steps left it ({before:.3f}, then {after_keep:.3f}: tied)'}[ours_trend]
    text = [f'**The KL.** Anchored at the start, the KL to the reference (five-step means) {kept}. The book prints '
            f'{book_first:.3f} at step 39 of its first run and {book_keep_kl:.3f} at the end of its anchored '
            'continuation, '
            + (f'a rise by a factor of {book_keep_kl / book_first:.1f} (from a single step\'s value)'
               + (' as well. ' if ours_trend == ties.HIGHER else ', where ours did not rise. ')
               if book_trend == ties.HIGHER else 'no change beyond the tolerance. ')
            + f'After the reset the KL to the new reference starts at {reset["history"][0]["kl_ref"]:.3f} (at the first '
            f'update the reference is the policy itself) and ends at {after_reset:.3f} (book: {book_reset_kl:.3f}): '
            + {ties.LOWER: 'the accumulated pull towards the start is gone.',
               ties.TIED: f'tied with the anchored run\'s {after_keep:.3f} on this one draw (the table below counts the '
                          'seeds on which it is lower).',
               ties.HIGHER: 'above the anchored run, so the reset did not remove the pull here.'}[
                ties.compare(after_reset, after_keep, tols['kl_last5'])]]
    h_keep, h_reset = last_five(keep['history'], 'entropy'), last_five(reset['history'], 'entropy')
    book_h = {name: book_reset(name, 'entropy') for name in (KEEP, RESET)}
    text.append(f'**The entropy.** After the reset it ends {PLACE[ties.compare(h_reset, h_keep, tols["entropy_last5"])]} '
                f'the anchored run ({h_reset:.3f} against {h_keep:.3f}; book: {book_h[RESET]:.3f} against '
                f'{book_h[KEEP]:.3f}, {PLACE[ties.compare(book_h[RESET], book_h[KEEP], tols["entropy_last5"])]} it).')
    ours_p, ours_d = ({name: draw[name]['metrics'][key] for name in (KEEP, RESET)} for key in ('pass1', 'distinct'))
    book_p, book_d = ({name: book_reset(name, label) for name in (KEEP, RESET)} for label in ('pass@1', 'distinct'))
    ranked = {ties.TIED: 'tied: one draw cannot rank them', ties.HIGHER: 'higher by more than the tolerance',
              ties.LOWER: 'lower by more than the tolerance'}
    fewer = {ties.TIED: 'tied', ties.HIGHER: 'more', ties.LOWER: 'fewer'}
    text.append(f'**Held out.** pass@1 is {ours_p[RESET]:.3f} after the reset and {ours_p[KEEP]:.3f} anchored: '
                f'{ranked[ties.compare(ours_p[RESET], ours_p[KEEP], tols["pass1"])]}. The reset run produces '
                f'{ours_d[RESET]:.1f} distinct action sequences per task against {ours_d[KEEP]:.1f} '
                f'({fewer[ties.compare(ours_d[RESET], ours_d[KEEP], tols["distinct"])]}). The book has pass@1 '
                f'{book_p[RESET]:.3f} against {book_p[KEEP]:.3f} '
                f'({ranked[ties.compare(book_p[RESET], book_p[KEEP], tols["pass1"])]}) and {book_d[RESET]:.1f} against '
                f'{book_d[KEEP]:.1f} distinct sequences '
                f'({fewer[ties.compare(book_d[RESET], book_d[KEEP], tols["distinct"])]}); it reads the pair as the reset '
                'freeing the policy to keep improving at the cost of some of the diversity the KL kept.')
    return '\n\n'.join(text)


# --- findings over the seeds: the opening bullets, the verdict table, the summary -------------------------------

def comparisons(draw, tols):
    """The comparisons the findings count on one seed's runs (or the book's numbers when draw is None) -> {name: word}."""
    if draw is None:
        book = {name: book_trajectory(name)[39][1] for name in COLLAPSE_SETTINGS}
        kl = (book_keep := book_reset(KEEP, 'KL to reference'), book_kl('KL k3+ 0.3')[0][3])
        pass1 = (book_reset(RESET, 'pass@1'), book_reset(KEEP, 'pass@1'))
    else:
        book = {name: draw[name]['history'][39]['reward'] for name in COLLAPSE_SETTINGS}
        kl = (last_five(draw[KEEP]['history'], 'kl_ref'), last_five(draw['KL k3+ 0.3']['history'], 'kl_ref'))
        pass1 = (draw[RESET]['metrics']['pass1'], draw[KEEP]['metrics']['pass1'])
    return {'KL k3+ 0.3': PLACE[ties.compare(book['KL k3+ 0.3'], book['none'], tols['reward39'])],
            'entropy 0.03': PLACE[ties.compare(book['entropy 0.03'], book['none'], tols['reward39'])],
            'anchored KL': PLACE[ties.compare(*kl, tols['kl_last5'])],
            'reset pass@1': PLACE[ties.compare(*pass1, tols['pass1'])]}


def _counts(words):
    """'below on 3 of 5, tied on 2' for a list of PLACE words, one per seed."""
    found = [f'{_word(word)} on {words.count(word)}' for word in ('below', 'tied with', 'above') if word in words]
    found[0] += f' of {len(words)}'
    return ', '.join(found)


def _word(place):
    """A PLACE word standing alone: 'tied' for 'tied with'."""
    return place.replace('tied with', 'tied')


def _sentence(text):
    return text[:1].upper() + text[1:]


def _claim(summary, seed0_evidence):
    """One claim's five-seed verdict, with seed 0 named when that draw went the other way."""
    n, k, tied = len(summary['seeds']), summary['held_on'], summary.get('tied_on', 0)
    verb = {claims.SEED_DEPENDENT: 'is seed-dependent', claims.TIED: 'is tied'}.get(summary['verdict'],
                                                                                   summary['verdict'])
    said = (f'{summary["text"]}: true on {k} of {n} seeds' + (f' and tied on {tied}' if tied else '')
            + f', so it {verb}')
    if 0 in summary['seeds']:
        i = summary['seeds'].index(0)
        seed0 = summary['outcomes'][i] if 'outcomes' in summary else (
            claims.HOLDS if summary['held'][i] else claims.DOES_NOT_HOLD)
        if seed0 == claims.TIED:
            said += f' (seed 0, the chapter\'s single draw, is tied: {seed0_evidence})'
        elif seed0 != summary['verdict'] and summary['verdict'] in (claims.HOLDS, claims.DOES_NOT_HOLD):
            said += f' (seed 0, the chapter\'s single draw, went the other way: {seed0_evidence})'
    return said


def findings(five, runs_by_seed, tols, tiny, embedding_dim, seeds=SEEDS):
    """3-6 Markdown bullets of what held and what did not on the seeds, problem by problem."""
    by_key = {summary['key']: summary for summary in five}
    seed0 = runs_by_seed[seeds.index(0)] if 0 in seeds else None

    def said(key):
        evidence = claims.by_key(key).judge(seed0, runs_by_seed)[2] if seed0 is not None else ''
        return _claim(by_key[key], evidence)

    per_seed = [comparisons(runs, tols) for runs in runs_by_seed]
    book = comparisons(None, tols)
    counted = {name: _counts([words[name] for words in per_seed]) for name in book}
    n = len(seeds)
    book_tiny, gap, per_word = parameter_gap(tiny, embedding_dim)
    trained = sum(TRAINED_BYTES.values())
    bullets = [
        '**An early entropy fall (problem 1).** ' + _sentence('; '.join(map(said, PROBLEM_CLAIMS['collapse']))) + '.',
        f'**What the two remedies cost in batch reward at step 39**, against the unregularised run: the KL penalty '
        f'{_word(book["KL k3+ 0.3"])} in the book, {counted["KL k3+ 0.3"]} of our seeds; the entropy bonus '
        f'{_word(book["entropy 0.03"])} in the book, {counted["entropy 0.03"]} of ours (one run against one, tied '
        f'within {tols["reward39"]:.3f}).',
        '**The KL coefficient (problem 2).** ' + _sentence('; '.join(map(said, PROBLEM_CLAIMS['kl']))) + '.',
        f'**The reference\'s cost (problem 3)** is arithmetic and the same on every seed: bf16 weights add '
        f'{REFERENCE_BYTES / trained:.1%} to the policy\'s training state at every size, one forward pass '
        f'{EXTRA_COMPUTE:.0%} to the trainer\'s compute; our TinyAgent has {tiny:,} parameters, the book\'s {book_tiny:,}'
        + (f' ({gap // per_word} vocabulary entries more).' if gap > 0 and gap % per_word == 0 else '.'),
        '**Resetting the reference (problem 4).** ' + _sentence('; '.join(map(said, PROBLEM_CLAIMS['reset'])))
        + f'. Anchored at the start for 20 more steps, the KL against where the first run left it: {_word(book["anchored KL"])} '
        f'in the book ({book_kl("KL k3+ 0.3")[0][3]:.3f}, then {book_reset(KEEP, "KL to reference"):.3f}), '
        f'{counted["anchored KL"]} of our seeds (tied within {tols["kl_last5"]:.3f}). pass@1 after the reset against '
        f'the anchored run: {_word(book["reset pass@1"])} in the book, {counted["reset pass@1"]} of ours (tied within '
        f'{tols["pass1"]:.3f}).',
    ]
    return '\n'.join(f'* {bullet}' for bullet in bullets)


def verdict_table(draw_verdicts, five):
    """The chapter's readings of the reset: seed 0 as one draw beside the five-seed verdict -> Markdown."""
    by_key = {summary['key']: summary for summary in five}
    said = {claims.HOLDS: 'yes', claims.DOES_NOT_HOLD: 'no', claims.TIED: 'tied (inside the one-draw tolerance)'}
    rows = ''.join(f'| {v["text"]} | {said[claims.outcome_of(v)]} | {v["evidence"]} | '
                   f'{_five_count(by_key[v["key"]])}: {by_key[v["key"]]["verdict"]} |\n' for v in draw_verdicts)
    return ('| what the chapter reads from the reset | true on seed 0 (one draw)? | measured on seed 0 | '
            'five-seed verdict |\n|---|---|---|---|\n' + rows)


def _five_count(summary):
    """'4 of 5' for a seed-verdict dict, with its tied seeds apart: '3 of 5, 1 tied'."""
    tied = summary.get('tied_on', 0)
    return f'{summary["held_on"]} of {len(summary["seeds"])}' + (f', {tied} tied' if tied else '')


def summary(five, runs_by_seed, tols, seeds=SEEDS):
    """The closing bullets: each problem's readings with their seed counts, and where ours part from the book."""
    n = len(seeds)
    by_key = {item['key']: item for item in five}
    problems = {'collapse': 'An early entropy fall', 'kl': 'The KL coefficient\'s scale',
                'reset': 'A reference reset'}
    bullets = [f'{title}: ' + '; '.join(f'{by_key[key]["text"]} ({_five_count(by_key[key])} seeds, '
                                        f'{by_key[key]["verdict"]})' for key in PROBLEM_CLAIMS[name]) + '.'
               for name, title in problems.items()]
    book = comparisons(None, tols)
    per_seed = [comparisons(runs, tols) for runs in runs_by_seed]
    parted = [f'{what} ({_word(book[name])} in the book; {_counts([words[name] for words in per_seed])} of ours)'
              for name, what in [('KL k3+ 0.3', 'the KL run\'s final batch reward against no regularisation'),
                                 ('entropy 0.03', 'the bonus run\'s final batch reward against no regularisation'),
                                 ('reset pass@1', 'pass@1 after the reset against the anchored run'),
                                 ('anchored KL', 'the anchored continuation\'s KL against where the first run left it')]
              if sum(words[name] == book[name] for words in per_seed) * 2 < n]
    bullets.append('Where most of our seeds part from the book: ' + ('; '.join(parted) if parted else 'nowhere') + '.')
    return '\n'.join(f'* {bullet}' for bullet in bullets)
