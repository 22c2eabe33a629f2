"""The sentences and tables notebook 12 prints, built from what its cells computed and from the framework sweep's
record. Nothing here computes a result: each function lays out numbers it is given, or counts them."""
import math

from agentrl import prose
from agentrl.ch10 import claims, framework_claims, framework_map, ties

SHORT = {'none': '', 'ratio': '·r', 'ratio-detached': '·sg(r)'}  # how a KL weighting is written after the estimator
KINDS = ('k1', 'k2', 'k3', 'k3+')


def _at(rows, key, **match):
    return {r[key]: r for r in rows if all(r[k] == v for k, v in match.items())}


def off_policy_kl_lines(kl_rows, weightings):
    """The section 1 table: one line of distances, then one line per estimator and weighting."""
    steps = sorted({row['step'] for row in kl_rows})
    distance = {row['step']: row['kl_from_old'] for row in kl_rows}
    lines = [f'{"KL(pi || pi_old):":<17} | ' + ' | '.join(f'{distance[step]:<6.4f}' for step in steps)]
    for kind in KINDS:
        for weighting in weightings:
            at = _at(kl_rows, 'step', kind=kind, weighting=weighting)
            lines.append(f'{kind + SHORT[weighting]:<17} | '
                         + ' | '.join(f'{at[step]["reverse_error"]:<6.3f}' for step in steps))
    return [line.rstrip() for line in lines]


def off_policy_kl_reading(kl_rows, weightings, k3_plus_rows):
    """What the section 1 table shows, with what `k3+` weighted by a differentiated ratio follows instead."""
    far = max(r['step'] for r in kl_rows)
    steps = {r['step'] for r in kl_rows}

    def error(kind, weighting, step, against='reverse_error'):
        return next(r[against] for r in kl_rows if (r['kind'], r['weighting'], r['step']) == (kind, weighting, step))
    exact = [f'`{k}{SHORT[w]}`' for k in KINDS for w in weightings if max(error(k, w, s) for s in steps) < 1e-12]
    combined = max(r['combined_error'] for r in k3_plus_rows)
    return (f'Exact against the reverse KL at every distance: {prose.and_join(exact)}. Without the weight, `k3+` is '
            f'exact on the first line and {error("k3+", "none", far):.0%} off on the last (a distance of '
            f'{next(r["kl_from_old"] for r in kl_rows if r["step"] == far):.2f} nats from $\\pi_{{\\text{{old}}}}$), '
            f'and $k_3$ weighted by a held-constant ratio follows the forward KL there with an error of '
            f'{error("k3", "ratio-detached", far, "forward_error"):.0e}. The weighted $k_2$ and `k3+` with a '
            f'differentiated ratio follow neither: {error("k2", "ratio", far):.0%} and '
            f'{error("k3+", "ratio", far):.0%} off on the last line. A reader choosing the flag should therefore ask '
            'two questions, which estimator and whether the weight is detached; the map at the end answers both for '
            'each framework.\n\n'
            'What `k3+·r` follows instead: $2\\,\\nabla \\mathrm{KL}(\\pi_\\theta \\,\\|\\, \\pi_{\\text{ref}}) - '
            '\\nabla \\mathrm{KL}(\\pi_{\\text{ref}} \\,\\|\\, \\pi_\\theta)$, twice the reverse KL\'s gradient less '
            f'the forward KL\'s, with a relative error of at most {combined:.0e} on the {len(k3_plus_rows)} distances. '
            'Its error against the reverse KL equals that of `k3·sg(r)` on every line because both gradients sit '
            'the same distance from the reverse one, on opposite sides.')


def _grid_lines(rows, key, head, head_value, head_fmt, names, cell, width):
    """A printed block: a head line of one value per `key` (a distance), then per name a line of its cells."""
    xs = sorted({r[key] for r in rows})
    value = {r[key]: r[head_value] for r in rows}
    lines = [f'{head:<25} | ' + ' | '.join(f'{value[x]:{head_fmt}}' for x in xs)]
    for name in names:
        at = _at(rows, key, loss=name)
        lines.append(f'{name:<25} | ' + ' | '.join(f'{cell(at[x]):<{width}}' for x in xs))
    return [line.rstrip() for line in lines]


def two_token_lines(pair_rows, names):
    return _grid_lines(pair_rows, 'shift', 'sequence KL:', 'sequence_kl', '<13.3f', names,
                       lambda r: '%.3f / %.3f' % (r['first_error'], r['second_error']), 13)


def two_token_reading(pair_rows):
    local = [r for r in pair_rows if r['loss'] == 'k2 per token']
    return (f'$k_2$ per token and $k_1$ as each token\'s own reward agree digit for digit, and both are exact on the '
            f'second token, after which nothing comes. On the first token they miss between '
            f'{min(r["first_error"] for r in local):.0%} and {max(r["first_error"] for r in local):.0%} of the '
            'gradient: the part by which the first choice changes the KL of the second token. $k_1$ as a reward '
            'credited to every earlier choice (the whole sequence, or the reward to go) is exact on both. So the claim '
            'holds per token and fails per sequence, by exactly the cross term that section 10.4 computed.')


def aggregation_lines(lengths, scales, sums, pairs):
    """scales, sums: {mode: [scale per sequence]}, {mode: sum of token weights}; pairs: [(term, policy, [factor])]."""
    lines = [f'{"mode":<24} | ' + ' | '.join(f'L = {n:<4}' for n in lengths) + ' | weights sum to']
    for mode, scale in scales.items():
        lines.append(f'{mode:<24} | ' + ' | '.join(f'{s:<8.4f}' for s in scale) + f' | {sums[mode]:.4f}')
    for term, policy, ratio in pairs:
        lines.append(f'term {term} vs policy {policy}: ' + ', '.join(f'x{r:.2f}' for r in ratio))
    return [line.rstrip() for line in lines]


def aggregation_reading(largest, lengths, ratio, scale_rows, horizon):
    """largest: autograd against the derived weights; ratio: the TRL cross line's factors; scale_rows: every pair."""
    varying = [r for r in scale_rows if not r['constant']]
    fixed = [r for r in scale_rows if r['constant']]
    at = {(r['term'], r['policy']): r['scales'][0] for r in fixed}
    return (f'Autograd\'s token weights equal the derived scales in every mode (largest difference {largest:.0e}). '
            f'The first cross line is TRL with `loss_type=\'grpo\'` and an entropy bonus, which the map records as a '
            f'token mean over the micro-batch while the policy term is a mean per sequence: against its policy '
            f'gradient, the bonus of the {lengths[0]}-token sequence is scaled by {ratio[0]:.2f} and that of the '
            f'{lengths[-1]}-token one by {ratio[-1]:.2f}.\n\n'
            f'Of the {len(scale_rows)} ordered pairs of different modes, the factor changes from one sequence to the '
            f'next in {len(varying)}, '
            + ('every one of them a pair with `seq-mean-token-mean`' if all(r['involves_per_sequence_mean'] for r in
               varying) else 'not all of them pairs with `seq-mean-token-mean`')
            + f'. In the other {len(fixed)} it is one '
            f'number for the whole batch: a term summed per sequence (`seq-mean-token-sum`) weighs '
            f'{at["seq-mean-token-sum", "token-mean"]:.2f}, the mean length $\\bar L$ of these {len(lengths)} '
            f'sequences, against a `token-mean` policy term, and {at["seq-mean-token-sum", "seq-mean-token-sum-norm"]:g}, '
            f'the horizon $H = {horizon}$, against Dr. GRPO\'s. The coefficient is then off by a constant, the same '
            'for a short sequence as for a long one.')


def ratio_lines(ratio_rows, losses):
    return _grid_lines(ratio_rows, 'step', 'KL(pi || pi_old):', 'kl_from_old', '<11.4f', losses,
                       lambda r: '%.3f/%.3f' % (r['error'], r['cosine']), 11)


def ratio_reading(ratio_rows, mixed):
    """mixed: framework_options.gspo_on_policy on a policy whose sequences have 1 or 2 tokens."""
    last = max(r['step'] for r in ratio_rows)
    at_last = {r['loss']: r for r in ratio_rows if r['step'] == last}
    gspo_start = next(r for r in ratio_rows if r['loss'] == 'GSPO' and r['step'] == 0)
    return (f'On policy every loss points the true way (cosine 1) on this policy, whose sequences all have two '
            f'tokens: there GSPO\'s gradient is the true one divided by the length, {gspo_start["error"]:.2f} off in '
            f'size, because its log-ratio is a mean over the sequence. That holds only when every sequence has the '
            f'same length: GSPO divides each sequence\'s term by its own length, so on a policy whose sequences have '
            f'{prose.and_join([str(n) for n in mixed["lengths"]])} tokens its on-policy gradient has cosine '
            f'{mixed["cosine"]:.3f} with the true one (and equals, to {mixed["error_vs_scaled"]:.0e}, the true '
            f'gradient with each sequence\'s term divided by its length). Off policy, only the whole-sequence ratio '
            f'stays exact. Token ratios without a clip already drift (cosine '
            f'{at_last["token ratios, unclipped"]["cosine"]:.2f} on the last line), since a token ratio cannot see how '
            f'the earlier token changed the sequence; PPO\'s clip then silences tokens and falls to cosine '
            f'{at_last["PPO, token ratios"]["cosine"]:.2f}; CISPO keeps the capped gradients and stays at '
            f'{at_last["CISPO"]["cosine"]:.2f}; GSPO silences whole sequences and reaches {at_last["GSPO"]["cosine"]:.2f}. '
            'None of them is meant to be exact that far from $\\pi_{\\text{old}}$: the clip is a trust region, not an '
            'estimator. What the table shows is how differently the three spend it.')


def sampler_lines(sampler_rows, modes):
    caps = sorted({r['threshold'] for r in sampler_rows})
    cap_text = ['C = inf' if math.isinf(c) else f'C = {c:g}' for c in caps]
    lines = [f'{"temperature":<11} | {"mode":<17} | ' + ' | '.join(f'{c:<7}' for c in cap_text) + ' | uncorrected']
    for temperature in sorted({r['temperature'] for r in sampler_rows}):
        for mode in modes:
            at = _at(sampler_rows, 'threshold', temperature=temperature, mode=mode)
            lines.append(f'{temperature:<11} | {mode:<17} | ' + ' | '.join(f'{at[c]["error"]:<7.3f}' for c in caps)
                         + f' | {at[caps[0]]["uncorrected"]:.3f}')
    return [line.rstrip() for line in lines]


def sampler_reading(sampler_rows):
    caps = sorted({r['threshold'] for r in sampler_rows})
    hot = max(r['temperature'] for r in sampler_rows)
    row = {(r['mode'], r['threshold']): r for r in sampler_rows if r['temperature'] == hot}
    return (f'With no cap, the sequence weights recover the true gradient exactly, and the token weights do not: at '
            f'temperature {hot:g} they leave {row[("token_truncate", math.inf)]["error"]:.0%} of error where no '
            f'correction leaves {row[("token_truncate", math.inf)]["uncorrected"]:.0%}. A token weight fixes the '
            'probability of its own token but not the distribution of the tokens after it, which the advantage also '
            f'depends on. The cap is a trade: at $C = {caps[0]:g}$, truncating the sequence weight leaves '
            f'{row[("sequence_truncate", caps[0])]["error"]:.0%}, and masking the sequences beyond it leaves '
            f'{row[("sequence_mask", caps[0])]["error"]:.0%}, more than no correction at all, because the masked '
            'sequences take their whole gradient with them.')


def settings_table(specs):
    return '\n'.join(
        ['| setting | engine settings | KL weighting | plug-in options |', '|---|---|---|---|']
        + [f'| {spec.name} | ' + (', '.join(f'`{k}={v}`' for k, v in spec.fields) or '(the defaults)')
           + f' | `{spec.kl_weighting}` | ' + (', '.join(f'`{k}={v}`' for k, v in spec.options) or '(none)') + ' |'
           for spec in specs])


def claims_list(n_seeds):
    return (f'The rule, the chapter\'s own (notebook 09): **{claims.seed_rule_text(n_seeds)}**. The claims:\n\n'
            + '\n'.join(f'{i}. {claim.text} (`{claim.key}`; reads {prose.and_join([f"`{n}`" for n in claim.needs])})'
                        for i, claim in enumerate(framework_claims.CLAIMS, 1)))


def record_sentence(record, code):
    """Where the record's runs come from, and whether they stand for the training code `code` (made by it, or rerun
    by it bit-identically: machinery.certify)."""
    runs_by_seed = [record['runs'][str(s)] for s in record['seeds']]
    certified = [c for c in record.get('certified', ()) if c['code'] == code]
    if record['code'] == code:
        source = 'It was made by the training code of this tree.'
    elif certified:
        c = certified[-1]
        source = (f'It was made by earlier training code; this tree\'s code trained seed '
                  f'{prose.and_join([str(s) for s in c["seeds"]])} of every setting again ({c["runs"]} runs, '
                  f'{c["cpu"]}, {c["date"]}) and every number came out bit-identical, so the record stands for it.')
    else:
        source = ('**It was made by other training code than this tree\'s: run `make framework-sweep` again before '
                  'reading it.**')
    return (f'The record holds {sum(len(r) for r in runs_by_seed)} runs: {len(runs_by_seed[0])} settings on seeds '
            f'{prose.and_join([str(s) for s in record["seeds"]])}, {record["steps"]} steps each, trained in '
            f'{record["seconds"] / 60:.0f} min on {record["session"]["scheduler"]} ({record["session"]["workers"]} '
            f'workers, {record["session"]["date"]}). ' + source)


def seed_mean(runs_by_seed, setting, value):
    return sum(value(runs[setting]) for runs in runs_by_seed) / len(runs_by_seed)


COLUMNS = [('entropy', lambda r: claims.entropy_end(r), '.3f'),
           ('pass@1', lambda r: claims.metric(r, 'pass1'), '.3f'),
           ('pass@8', lambda r: claims.metric(r, 'pass8'), '.3f'),
           ('distinct', lambda r: claims.metric(r, 'distinct'), '.1f'),
           ('KL start', lambda r: claims.metric(r, 'kl_start'), '.3f'),
           ('tokens', lambda r: framework_claims.late_mean(r, 'policy_tokens'), '.1f')]


def option_runs_table(runs_by_seed, order):
    width = max(map(len, order))
    table = [f'{"setting":<{width}}  ' + '  '.join(f'{name:>8}' for name, _, _ in COLUMNS)]
    table += [f'{setting:<{width}}  ' + '  '.join(f'{seed_mean(runs_by_seed, setting, value):>8{fmt}}'
                                                   for _, value, fmt in COLUMNS) for setting in order]
    return table


def verdict_details(option_verdicts, evidence, seeds):
    return '\n'.join(
        f'<details><summary><code>{v["key"]}</code>: {v["verdict"]} ({v["held_on"]} of {len(seeds)})</summary>\n\n'
        + '\n'.join(f'- seed {s}: {"true" if held else "false"}: {text}'
                    for s, (held, text) in zip(seeds, evidence[v['key']]))
        + '\n\n</details>' for v in option_verdicts)


def _by_word(option_verdicts):
    return {word: [v for v in option_verdicts if v['verdict'] == word]
            for word in (claims.HOLDS, claims.TIED, claims.SEED_DEPENDENT, claims.DOES_NOT_HOLD)}


def verdict_summary(option_verdicts, runs_by_seed):
    by_word = _by_word(option_verdicts)

    def listed(word):
        return prose.and_join([f'`{v["key"]}`' for v in by_word[word]]) if by_word[word] else 'none'

    def mean(setting, key):
        return seed_mean(runs_by_seed, setting, lambda r: framework_claims.run_mean(r, key))
    gspo, cispo, ppo = mean('GSPO', 'seq_clip_frac'), mean('CISPO', 'capped_frac'), mean('none', 'clip_frac')
    gap = mean(framework_claims.UNCORRECTED, 'sampler_kl')
    return (f'Of {len(option_verdicts)} claims, {len(by_word[claims.HOLDS])} hold on these seeds '
            f'({listed(claims.HOLDS)}), {len(by_word[claims.TIED])} are tied, their gaps inside the noise on too '
            f'many seeds ({listed(claims.TIED)}), {len(by_word[claims.SEED_DEPENDENT])} depend on the seed '
            f'({listed(claims.SEED_DEPENDENT)}) and {len(by_word[claims.DOES_NOT_HOLD])} do not hold '
            f'({listed(claims.DOES_NOT_HOLD)}).\n\n'
            f'What the mechanisms did, as the runs logged it (means over minibatches and seeds): PPO\'s clip removed '
            f'the gradient of {ppo:.1%} of the policy tokens in the unregularised run; GSPO\'s clip on the sequence '
            f'ratio silenced {gspo:.1%} of the sequences; CISPO found {cispo:.1%} of the tokens outside its cap, each '
            f'still with a gradient. The sampler at temperature {framework_claims.SAMPLER_TEMPERATURE} differed from '
            f'the trainer by {gap:.3f} nats per policy token.')


RATIO_READING = ('KL k3 0.3', 'KL k3 0.3, ratio-weighted', 'KL k3+ 0.3')


def ratio_weighted_reading(runs_by_seed):
    ends = {name: seed_mean(runs_by_seed, name, claims.entropy_end) for name in RATIO_READING}
    kls = {name: seed_mean(runs_by_seed, name, lambda r: framework_claims.run_mean(r, 'kl_ref')) for name in ends}
    tie = entropy_tie(runs_by_seed)
    nearer = min(('KL k3 0.3', 'KL k3+ 0.3'), key=lambda name: abs(ends[name] - ends['KL k3 0.3, ratio-weighted']))
    return ('Final entropy, mean of the five seeds: ' + prose.and_join([f'`{n}` {v:.3f}' for n, v in ends.items()])
            + '; the KL to the reference logged during training: '
            + prose.and_join([f'`{n}` {v:.3f}' for n, v in kls.items()])
            + f'. The ratio-weighted run ends nearer `{nearer}`'
            + (', as the reading expects.' if nearer == 'KL k3+ 0.3' else ', against the reading.')
            + f' By the tie rule (two settings are tied below a gap of {tie["tolerance"]:.3f}, two standard errors '
            f'over the {len(runs_by_seed)} seeds), its final entropy is {tie["against"]["KL k3+ 0.3"]} against '
            f'`KL k3+ 0.3` and {tie["against"]["KL k3 0.3"]} against `KL k3 0.3`.')


def map_heading(frameworks, rows):
    read_at = 'Read at: ' + prose.and_join(
        f'{f["framework"]["name"]} {f["framework"]["version"]} (`{f["framework"]["commit"][:7]}`, '
        f'{f["framework"]["commit_date"]})' for f in frameworks) + '.'
    count = (f'{len(rows)} options in all, {sum(bool(r["ours"]) for r in rows)} of them computed by a function '
             'here. Each topic unfolds on a click.')
    unrun = [f for f in frameworks if f['framework'].get('not_run')]
    if unrun:  # a framework whose code was never executed says so here, once, rather than in each entry
        count += ' ' + ' '.join(f'**{f["framework"]["name"]}.** {framework_map.marked_prose(f["framework"]["not_run"])}'
                                for f in unrun)
    return read_at, count


def map_topic(rows, topic, executed=None):
    """One topic's entries, folded; executed: {(framework, option): what running its code beside ours found}."""
    chosen = [r for r in rows if r['topic'] == topic]
    mapped = sum(bool(r['ours']) for r in chosen)
    return (f'<details><summary><b>{topic}</b>: {len(chosen)} options, {mapped} computed here</summary>\n\n'
            + framework_map.markdown_entries(chosen, executed=executed) + '\n\n</details>')


SAMPLED = [('none', '#e66101'), (framework_claims.UNCORRECTED, '#737373'),
           (f'sampler T={framework_claims.SAMPLER_TEMPERATURE}, token_truncate 2', '#4575b4'),
           (f'sampler T={framework_claims.SAMPLER_TEMPERATURE}, sequence_mask 2', '#1a9850')]  # the figure's right panel


def figure_caption(record, steps):
    return (f'*Figure.* Policy-token entropy at each of the {steps} GRPO steps, mean of the '
            f'{len(record["seeds"])} seeds {prose.and_join([str(s) for s in record["seeds"]])} for each setting. '
            'Left: the options of sections 3, 4 and 6 against the unregularised run and `KL k3+ 0.3`. Right: a '
            f'sampler drawing at temperature {framework_claims.SAMPLER_TEMPERATURE} while the trainer learns at 1.0, '
            'uncorrected and with two of section 5\'s corrections.')


def entropy_tie(runs_by_seed, names=RATIO_READING):
    """The ratio-weighted run's final entropy against the two unweighted ones, by the tie rule over the seeds ->
    dict (tolerance, means, against: {name: 'higher'/'lower'/'tied'})."""
    replicates = {n: [claims.entropy_end(runs[n]) for runs in runs_by_seed] for n in names}
    tol = ties.tolerance(replicates, n_each=len(runs_by_seed))
    means = {n: sum(v) / len(v) for n, v in replicates.items()}
    weighted = 'KL k3 0.3, ratio-weighted'
    return dict(tolerance=tol, means=means,
                against={n: ties.compare(means[weighted], means[n], tol) for n in names if n != weighted})


def _exact_bullets(found):
    kl, k3p, scales, mixed, ratio, sampler = (found[k] for k in ('kl_rows', 'k3_plus_rows', 'scale_rows', 'mixed',
                                                                 'ratio_rows', 'sampler_rows'))
    steps = sorted({r['step'] for r in kl})
    combos = {(r['kind'], r['weighting']) for r in kl}
    exact = sorted(c for c in combos if max(r['reverse_error'] for r in kl if (r['kind'], r['weighting']) == c) < 1e-12)
    varying = [r for r in scales if not r['constant']]
    last = max(r['step'] for r in ratio)
    seq = max(r['error'] for r in ratio if r['loss'] == 'sequence ratio, unclipped')
    hot = max(r['temperature'] for r in sampler)
    token = next(r for r in sampler if (r['temperature'], r['mode']) == (hot, 'token_truncate')
                 and math.isinf(r['threshold']))
    return [
        f'**A KL term on tokens $\\pi_{{\\text{{old}}}}$ drew** (exact sums, no sampling, {len(steps)} distances): '
        f'{len(exact)} of {len(combos)} estimator-weighting pairs follow the reverse KL\'s gradient at every '
        f'distance ({prose.and_join([f"`{k}{SHORT[w]}`" for k, w in exact])}). `k3+` times a differentiated ratio '
        f'does not: it follows $2\\,\\nabla\\mathrm{{KL}}(\\pi_\\theta\\,\\|\\,\\pi_{{\\text{{ref}}}}) - '
        f'\\nabla\\mathrm{{KL}}(\\pi_{{\\text{{ref}}}}\\,\\|\\,\\pi_\\theta)$, to '
        f'{max(r["combined_error"] for r in k3p):.0e} on all {len(k3p)}.',
        f'**Aggregation** ({len(scales)} ordered pairs of modes): the weight of a KL or entropy term against the '
        f'policy term changes with the sequence\'s length in {len(varying)} pairs, all of them with '
        f'`seq-mean-token-mean`; in the other {len(scales) - len(varying)} it is one constant for the batch (the '
        'mean length against `token-mean`, the horizon against Dr. GRPO).',
        f'**Ratios** (exact sums): on policy GSPO is the true gradient divided by the length only when all '
        f'sequences have the same length; with lengths {prose.and_join([str(n) for n in mixed["lengths"]])} mixed '
        f'its cosine with the true gradient is {mixed["cosine"]:.3f}. Away from $\\pi_{{\\text{{old}}}}$ only the '
        f'whole-sequence ratio stays exact (error {seq:.0e}); at the farthest step PPO\'s token clip keeps cosine '
        f'{next(r["cosine"] for r in ratio if r["step"] == last and r["loss"] == "PPO, token ratios"):.2f}.',
        f'**A sampler at another temperature** (exact sums): uncapped sequence weights recover the true gradient; '
        f'token weights at temperature {hot:g} leave {token["error"]:.0%} of error where no correction leaves '
        f'{token["uncorrected"]:.0%}.']


def findings(found, option_verdicts, runs_by_seed, rows):
    """The notebook's opening bullets: found holds the exact tables of this execution (see framework_options),
    option_verdicts the sweep's verdicts, rows the map's options."""
    by_word = _by_word(option_verdicts)
    n = len(runs_by_seed)
    failing = prose.and_join([f'`{v["key"]}` ({v["held_on"]} of {n})' for v in by_word[claims.DOES_NOT_HOLD]])
    tied_keys = prose.and_join([f'`{v["key"]}`' for v in by_word[claims.TIED]])
    tie = entropy_tie(runs_by_seed)
    weighted = tie['means']['KL k3 0.3, ratio-weighted']
    ratio_word = next((v['verdict'] for v in option_verdicts if v['key'] == 'ratio-kl-small'), 'not judged')
    bullets = _exact_bullets(found) + [
        f'**On TinyAgent** ({n} seeds, the chapter\'s rule): {len(by_word[claims.HOLDS])} of {len(option_verdicts)} '
        f'claims about the options hold'
        + (f', {len(by_word[claims.TIED])} are tied ({tied_keys})' if by_word[claims.TIED] else '')
        + f'; {failing or "none"} {"does" if len(by_word[claims.DOES_NOT_HOLD]) == 1 else "do"} not. Our reading of '
        f'`ratio-kl-small` ({ratio_word}): a differentiated ratio turns '
        f'the $k_3$ term\'s gradient into the reverse KL\'s even on policy, so the run should sit by `KL k3+ 0.3`, not '
        f'`KL k3 0.3`. Its final entropy {weighted:.3f} is {tie["against"]["KL k3+ 0.3"]} against `KL k3+ 0.3` '
        f'({tie["means"]["KL k3+ 0.3"]:.3f}) and {tie["against"]["KL k3 0.3"]} against `KL k3 0.3` '
        f'({tie["means"]["KL k3 0.3"]:.3f}), with two settings tied below a gap of {tie["tolerance"]:.3f} '
        f'(two standard errors over the {n} seeds).',
        f'**The map**: {len(rows)} options of six frameworks read in their source at a named commit, '
        f'{sum(bool(r["ours"]) for r in rows)} of them computed by a function here with a test; the rest say why '
        'not.']
    return '\n'.join(f'- {b}' for b in bullets)


def summary(found, option_verdicts, runs_by_seed):
    """The closing summary: the same findings, shorter."""
    by_word = _by_word(option_verdicts)
    mixed = found['mixed']
    varying = sum(not r['constant'] for r in found['scale_rows'])
    bullets = [
        'A KL term on tokens that $\\pi_{\\text{old}}$ drew is exact at every distance only with the ratio weight in '
        'the right combination: a differentiated ratio with $k_1$ or $k_3$, a held-constant one with $k_2$ or `k3+`; '
        '`k3+` with a differentiated ratio follows $2\\,\\nabla\\mathrm{KL}(\\pi_\\theta\\,\\|\\,\\pi_{\\text{ref}}) - '
        '\\nabla\\mathrm{KL}(\\pi_{\\text{ref}}\\,\\|\\,\\pi_\\theta)$.',
        '$k_2$ as a loss equals $k_1$ as each token\'s own reward; both miss, on every token but the last, the share '
        'of later tokens\' KL that an earlier choice causes.',
        f'An aggregation mode reweights sequences. A term aggregated unlike the policy term is rescaled by a factor '
        f'that follows each sequence\'s length in {varying} of {len(found["scale_rows"])} pairs, those with '
        '`seq-mean-token-mean`; otherwise by one constant (the mean length, or the horizon).',
        f'Only a whole-sequence ratio is exact away from $\\pi_{{\\text{{old}}}}$. On policy GSPO is the true gradient '
        f'over the length only for equal lengths (cosine {mixed["cosine"]:.3f} with lengths 1 and 2 mixed); a sampler '
        'is corrected exactly only by sequence weights.',
        f'On TinyAgent, {len(by_word[claims.HOLDS])} of {len(option_verdicts)} claims hold on {len(runs_by_seed)} '
        f'seeds and {len(by_word[claims.DOES_NOT_HOLD])} do not '
        f'({prose.and_join(["`" + v["key"] + "`" for v in by_word[claims.DOES_NOT_HOLD]])}).']
    return '## Summary\n\n' + '\n'.join(f'- {b}' for b in bullets)
