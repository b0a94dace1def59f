"""The Hugging Face prompt encoders (policy.text) on tiny randomly initialised models of the real classes,
loaded through their real `from_pretrained` (a tokenizer and a text_encoder subfolder, as in the pipelines)."""

from __future__ import annotations

import re

import pytest
import torch

WORDS = ("You are a helpful assistant who will provide prompts to an image generator . stack the red blocks "
         "system user <|im_start|> <|im_end|>")
CHAT = ("{% for m in messages %}<|im_start|> {{ m['role'] }} {% for c in m['content'] %}{{ c['text'] }}"
        "{% endfor %} <|im_end|> {% endfor %}")


def _tokenizer(**special):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[PAD]": 0, "[UNK]": 1, "</s>": 2}
    for w in WORDS.split():
        vocab.setdefault(w, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", unk_token="[UNK]", **special)


@pytest.fixture
def cosmos_dir(tmp_path):
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    torch.manual_seed(0)
    tok = _tokenizer()
    tok.chat_template = CHAT
    cfg = Qwen2_5_VLConfig(
        text_config=dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128,
                         rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]}),
        vision_config=dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=32,
                           fullatt_block_indexes=[0]))
    tok.save_pretrained(tmp_path / "tokenizer")
    Qwen2_5_VLForConditionalGeneration(cfg).save_pretrained(tmp_path / "text_encoder")
    return tmp_path


def test_cosmos_qwen_encoder_normalises_and_concatenates_every_layer(cosmos_dir):
    """transformers 5 returns a BatchEncoding from apply_chat_template (a Mapping, not a dict): the encoder
    passed the whole object to torch.as_tensor and failed on every real Cosmos prompt."""
    from policy.text import CosmosQwenTextEncoder

    enc = CosmosQwenTextEncoder.from_pretrained(cosmos_dir, torch_dtype=torch.float32, max_sequence_length=40)
    out = enc.encode(["stack the red blocks", "stack the blocks"], device="cpu", dtype=torch.float32)
    assert out.shape == (2, 40, 2 * 32)  # 2 layers of width 32, each normalised per token
    for layer in out.split(32, dim=-1):
        assert torch.allclose(layer.mean(-1), torch.zeros(2, 40), atol=1e-5)
        assert torch.allclose(layer.std(-1), torch.ones(2, 40), atol=1e-3)
    assert not torch.allclose(out[0], out[1])  # the prompt matters
    chat = [{"role": "system", "content": [{"type": "text", "text": enc.SYSTEM}]},
            {"role": "user", "content": [{"type": "text", "text": "stack the red blocks"}]}]
    ids = enc.tokenizer.apply_chat_template(chat, tokenize=True, max_length=40, truncation=True,
                                            padding="max_length", return_dict=True)["input_ids"]
    hidden = enc.model(torch.tensor([ids]), output_hidden_states=True).hidden_states[1]
    ref = (hidden - hidden.mean(-1, keepdim=True)) / (hidden.std(-1, keepdim=True) + 1e-8)
    assert torch.allclose(out[0, :, :32], ref[0], atol=1e-5)


def test_wan_umt5_encoder_zeroes_past_each_prompt(tmp_path):
    from transformers import UMT5Config, UMT5EncoderModel

    from policy.text import WanT5TextEncoder

    torch.manual_seed(0)
    _tokenizer(eos_token="</s>").save_pretrained(tmp_path / "tokenizer")
    UMT5EncoderModel(UMT5Config(vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2)
                     ).save_pretrained(tmp_path / "text_encoder")
    enc = WanT5TextEncoder.from_pretrained(tmp_path, torch_dtype=torch.float32, max_sequence_length=12)
    out = enc.encode(["stack the red blocks", "stack  the\tred blocks", "the"], device="cpu", dtype=torch.float32)
    assert out.shape == (3, 12, 16)
    assert torch.equal(out[0], out[1])  # whitespace is normalised
    assert out[2, 1:].abs().sum() == 0 and out[2, 0].abs().sum() > 0  # one token, then zeros
    assert out[0, :4].abs().sum(-1).min() > 0 and out[0, 4:].abs().sum() == 0


def test_wan_umt5_encoder_matches_the_pipeline_prompt_cleaning(tmp_path, monkeypatch):
    """The Wan pipeline cleans prompts (`prompt_clean`: ftfy, HTML unescaping, whitespace) before UMT5; the
    encoder used to normalise whitespace only, so "red &amp; blocks" gave other embeddings than the pipeline's."""
    import diffusers.pipelines.wan.pipeline_wan_i2v as wan_pipeline
    from transformers import UMT5Config, UMT5EncoderModel

    from policy.text import WanT5TextEncoder

    torch.manual_seed(0)
    tok = _tokenizer(eos_token="</s>")
    model = UMT5EncoderModel(UMT5Config(vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2))
    enc = WanT5TextEncoder(tok, model, max_sequence_length=12)
    if not hasattr(wan_pipeline, "ftfy"):  # ftfy is not installed here; fix_text leaves plain ASCII alone
        monkeypatch.setattr(wan_pipeline, "ftfy", type("ftfy", (), {"fix_text": staticmethod(lambda t: t)}),
                            raising=False)
    prompts = ["stack the red &amp; blocks", "stack the &amp;amp; red blocks", " stack\n the  red blocks\t"]
    pipe = type("Pipe", (), {"tokenizer": tok, "text_encoder": model, "_execution_device": torch.device("cpu")})()
    ref = wan_pipeline.WanImageToVideoPipeline._get_t5_prompt_embeds(
        pipe, prompts, max_sequence_length=12, device="cpu", dtype=torch.float32)
    out = enc.encode(prompts, device="cpu", dtype=torch.float32)
    assert torch.equal(out, ref)
    assert torch.equal(out[0], enc.encode(["stack the red & blocks"], device="cpu", dtype=torch.float32)[0])


def test_a_text_encoder_missing_weights_is_refused(tmp_path, cosmos_dir):
    """transformers loads a text_encoder folder missing some weights with a warning and random values there
    (the transformer and the VAE were already refused for it: policy/checkpoint.py); now the encoders too."""
    from safetensors.torch import load_file, save_file
    from transformers import UMT5Config, UMT5EncoderModel

    from policy.text import CosmosQwenTextEncoder, WanT5TextEncoder

    torch.manual_seed(0)
    wan_dir = tmp_path / "wan"
    _tokenizer(eos_token="</s>").save_pretrained(wan_dir / "tokenizer")
    UMT5EncoderModel(UMT5Config(vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2)
                     ).save_pretrained(wan_dir / "text_encoder")
    for cls, root in ((WanT5TextEncoder, wan_dir), (CosmosQwenTextEncoder, cosmos_dir)):
        weights = next((root / "text_encoder").glob("*.safetensors"))
        state = load_file(weights)
        dropped = next(k for k in sorted(state) if "norm" in k)  # not a tied weight (two would be missing)
        del state[dropped]
        save_file(state, weights, metadata={"format": "pt"})
        with pytest.raises(ValueError, match=rf"{root}/text_encoder does not match its model class.*1 weights "
                                             rf"missing: .*{re.escape(dropped.split('.', 1)[1])}$"):
            cls.from_pretrained(root, torch_dtype=torch.float32)


def test_a_cosmos_encoder_without_vision_or_lm_head_weights_loads(cosmos_dir):
    """The Cosmos encoder feeds Qwen2.5-VL text tokens only and reads the language model's hidden states: the
    vision tower and the lm_head never touch a prompt's features. The strict check covered the whole
    Qwen2_5_VLForConditionalGeneration, so a text-only encoder checkpoint (vision weights stripped to save
    ~1.3 GB) was refused; now it loads and encodes exactly as the whole checkpoint does."""
    from safetensors.torch import load_file, save_file

    from policy.text import CosmosQwenTextEncoder

    whole = CosmosQwenTextEncoder.from_pretrained(cosmos_dir, torch_dtype=torch.float32, max_sequence_length=40)
    want = whole.encode(["stack the red blocks"], device="cpu", dtype=torch.float32)
    weights = next((cosmos_dir / "text_encoder").glob("*.safetensors"))
    state = load_file(weights)
    text_only = {k: v for k, v in state.items() if not k.startswith(("visual.", "model.visual.", "lm_head."))}
    assert len(text_only) < len(state) - 1  # the vision tower and the lm_head are gone
    save_file(text_only, weights, metadata={"format": "pt"})
    enc = CosmosQwenTextEncoder.from_pretrained(cosmos_dir, torch_dtype=torch.float32, max_sequence_length=40)
    assert torch.equal(enc.encode(["stack the red blocks"], device="cpu", dtype=torch.float32), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cosmos_encoder_skips_the_lm_head_and_keeps_the_full_models_hidden_states(cosmos_dir, dtype):
    """The encoder ran the whole Qwen2_5_VLForConditionalGeneration, lm_head included: logits it never read
    (vocab x tokens, ~155 MB per 512-token prompt in bf16 for the 7B encoder). It now runs the language model
    alone; every hidden state, and so the prompt features, must stay bit-identical to the full model's."""
    from policy.text import CosmosQwenTextEncoder, language_model_hidden_states

    enc = CosmosQwenTextEncoder.from_pretrained(cosmos_dir, torch_dtype=dtype, max_sequence_length=40)
    heads = []
    enc.model.lm_head.register_forward_hook(lambda *_: heads.append(1))
    texts = ["stack the red blocks", "stack the blocks"]
    out = enc.encode(texts, device="cpu", dtype=dtype)
    assert heads == []  # no logits computed
    ids = enc.prompt_ids(texts)
    with torch.no_grad():
        full = enc.model(ids, output_hidden_states=True).hidden_states
        assert heads == [1]  # the hook does see the full model's lm_head
        mine = language_model_hidden_states(enc.model, ids)
    assert len(mine) == len(full) == 3  # embeddings + 2 layers
    assert all(torch.equal(a, b) for a, b in zip(mine, full, strict=True))
    layers = [(h - h.mean(-1, keepdim=True)) / (h.std(-1, keepdim=True) + 1e-8) for h in full[1:]]
    assert torch.equal(out, torch.cat(layers, dim=-1))


@pytest.mark.parametrize("backend", ["wan", "cosmos"])
def test_a_tokenizer_folder_that_cannot_load_is_named(tmp_path, cosmos_dir, backend):
    """An empty or half-copied tokenizer/ failed as transformers' "Couldn't instantiate the backend tokenizer from
    one of: (1) a `tokenizers` library serialization file, ..." with no path in it."""
    from policy.text import CosmosQwenTextEncoder, WanT5TextEncoder

    root = cosmos_dir if backend == "cosmos" else tmp_path / "wan"
    for f in (root / "tokenizer").glob("*"):
        f.unlink()
    (root / "tokenizer").mkdir(parents=True, exist_ok=True)
    cls = CosmosQwenTextEncoder if backend == "cosmos" else WanT5TextEncoder
    with pytest.raises(OSError, match=rf"cannot load the tokenizer in {re.escape(str(root))}/tokenizer: "):
        cls.from_pretrained(root, torch_dtype=torch.float32)
