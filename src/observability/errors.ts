/**
 * One error catalogue with stable codes (docs/design.md §11, habit 3). Every layer adds
 * context by wrapping with `cause`, never by string concatenation alone.
 */
export const ErrorCode = {
  ConfigInvalid: 'PORTAL_CONFIG_INVALID',
  RuleInvalid: 'PORTAL_RULE_INVALID',
  RuleCompile: 'PORTAL_RULE_COMPILE',
  InputInvalid: 'PORTAL_INPUT_INVALID',
  NotReady: 'PORTAL_NOT_READY',
  Internal: 'PORTAL_INTERNAL',
  Kube: 'PORTAL_KUBE',
  LeaseLost: 'PORTAL_LEASE_LOST',
  TermExpired: 'PORTAL_TERM_EXPIRED',
  Closed: 'PORTAL_CLOSED',
  QueueFull: 'PORTAL_QUEUE_FULL',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export class PortalError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PortalError';
    this.code = code;
  }
}

export function isPortalError(e: unknown, code?: ErrorCode): e is PortalError {
  return e instanceof PortalError && (code === undefined || e.code === code);
}

/** A thrown value as an Error, so a log's `err` is always an error object (pino's err serializer needs one for type and stack). */
export function toError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
