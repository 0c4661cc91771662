/** Errors raised by library functions, surfaced as CEL evaluation errors. */
import { EvaluationError } from '@marcbachmann/cel-js';

export function celError(message: string): Error {
  return new EvaluationError(message);
}
