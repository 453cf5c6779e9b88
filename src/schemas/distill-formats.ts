/**
 * The row formats a distillation writes (`reward-harness distill --format`), in a file of their own without zod: the
 * CLI's `--help` names them without loading a schema.
 */
export const DISTILL_FORMATS = ['trl', 'openrlhf', 'pointwise'] as const
