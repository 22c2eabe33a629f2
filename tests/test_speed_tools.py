"""The speed tools: the profile's sorting of samples into parts, the benchmark's fixed-length episodes, and the
pretrained model's matmul floor and table."""
import statistics

import torch
from torch.utils.flop_counter import FlopCounterMode

import agentrl as arl
from machinery import profile
from machinery.bench import SEQUENCE_LENGTHS, FixedLengthEnv
from machinery.bench_model import MODEL_HEADER, MatmulFloor, linear_flops, linear_weights, model_row
from substrate_fixtures import on_main, quick_base, tokenizer  # noqa: F401 (on_main: autouse)


def frames(*functions):
    return [f'{name} (/x/agentrl/file.py:{i})' for i, name in enumerate(functions)]


def test_each_sample_goes_to_the_part_named_on_its_stack():
    assert profile.part_of(frames('<module>', 'build_rl_base', 'make_demonstrations', 'step')) == 'demonstrations'
    assert profile.part_of(frames('build_rl_base', 'sft_train', 'backward')) == 'SFT steps'
    assert profile.part_of(frames('train_regularized', 'train_rl', 'sample_step', 'run_episodes')) == 'sampling'
    assert profile.part_of(frames('train_rl', 'rl_update', 'forward')) == 'update'
    assert profile.part_of(frames('_train_and_evaluate', 'diversity', 'sample_groups')) == 'evaluation'
    assert profile.part_of(frames('<module>', 'savefig')) == profile.OVERHEAD


def test_grading_is_counted_as_grading_wherever_it_happens():
    # a submitted function is graded while an episode is sampled, and while a demonstration is scripted
    assert profile.part_of(frames('sample_step', 'run_episodes', 'write', 'step', 'hidden_test_outcome')) == 'grading'
    assert profile.part_of(frames('make_demonstrations', 'demonstration', 'step', 'hidden_test_outcome')) == 'grading'
    assert profile.part_of(frames('<module>', '_serve', 'grade')) == 'grading'  # the grading worker itself


def test_raw_samples_are_summed_per_part_and_shared_per_step(tmp_path):
    raw = tmp_path / 'raw.txt'
    raw.write_text('process 1:"python -m x";train_rl (a.py:1);sample_step (b.py:2) 30\n'
                   'process 1:"python -m x";train_rl (a.py:1);rl_update (b.py:9) 50\n'
                   'process 2:"python -S w";_serve (s.py:3) 20\n'
                   'process 1:"python -m x";<module> (n.py:1) 100\n')
    counts = profile.read_samples(raw)
    assert counts == {'sampling': 30, 'update': 50, 'grading': 20, profile.OVERHEAD: 100}
    text = profile.table({'07_x': dict(seconds=125.0, samples=dict(counts))})
    row = [line for line in text.splitlines() if line.startswith('| 07_x')][0]
    assert '2 min 05 s' in row and '| 10 |' in row  # 200 samples at 20 per second
    assert row.split(' | ')[3:] == ['10%', '', '', '', '15%', '25%', '50% |']  # grading ... update, overhead


def test_fixed_length_episodes_have_the_length_they_are_named_after():
    tok, model = tokenizer(), quick_base()
    tasks = arl.make_tasks('train')[:4]
    for length, (prompt, observation, turns) in SEQUENCE_LENGTHS.items():
        envs = [FixedLengthEnv(prompt, observation, turns) for _ in tasks]
        trajs = arl.run_episodes(model, envs, tasks, tok, 1.0, torch.Generator().manual_seed(0))
        for traj in trajs:
            calls = traj.n_policy_tokens
            assert traj.info['n_turns'] == turns and turns <= calls <= 6 * turns
            assert len(traj.ids) == prompt + calls + turns * observation <= length
        assert prompt + 6 * turns + turns * observation == length  # the longest: every call 6 words


def tiny_llama():
    """A randomly initialised LlamaForCausalLM with SmolLM2's structure at a small size: grouped-query attention
    (4 query heads over 2 key-value heads), a gated SiLU MLP, tied embeddings."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, tie_word_embeddings=True)
    return LlamaForCausalLM(config).float()


def counted(function):
    """The FLOPs torch's own counter sees in one call: matrix products only (CPU attention is not counted)."""
    with FlopCounterMode(display=False) as counter:
        function()
    return counter.get_total_flops()


def test_the_model_floor_does_the_products_the_model_does():
    """The floor's FLOP formula equals what torch counts in a Llama forward, and in a forward and backward, and the
    floor's own pass does exactly those products, call by call."""
    model = tiny_llama()
    weights = linear_weights(model)
    assert len(weights) == 2 * 7 + 1  # q, k, v, o, gate, up, down per layer, and the tied head once
    ids = torch.randint(0, 300, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert counted(lambda: model(ids)) == linear_flops(weights, 14) > 0

    def forward_backward():
        model(ids).logits.log_softmax(-1).mean().backward()
    assert counted(forward_backward) == linear_flops(weights, 14, backward=True) == 3 * linear_flops(weights, 14)
    for calls, backward in (([14], False), ([14], True), ([6, 2, 2, 2], False)):
        floor = MatmulFloor(weights, calls, backward)
        assert counted(floor.run) == floor.flops == sum(linear_flops(weights, rows, backward) for rows in calls)


def test_the_model_table_rows_have_the_header_columns_and_the_medians():
    row = model_row('forward', 120, [1.0, 2.0, 3.0], [0.5, 0.5, 2.0], 3e9)
    ratios = statistics.median([1.0 / 0.5, 2.0 / 0.5, 3.0 / 2.0])
    assert row == f'| forward | 120 | 2.000 | 60 | 0.500 | 6.0 | {ratios:.2f} |' == '| forward | 120 | 2.000 | 60 | 0.500 | 6.0 | 2.00 |'
    header = MODEL_HEADER.splitlines()
    assert header[0].count('|') == header[1].count('|') == row.count('|')
