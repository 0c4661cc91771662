/**
 * The fencing contract every leader-only piece receives (docs/design.md §4):
 * the term's epoch and validity. The election (leader/term.ts) implements it;
 * the Runnable contract and leader-only components only name it, so they
 * depend on this contract and not on the elector.
 */
export interface Epoch {
  /** metadata.uid of the Lease (a deleted and recreated Lease is a new epoch). */
  leaseUid: string;
  /** spec.leaseTransitions when this term began. */
  transitions: number;
}

export interface LeaderTerm {
  readonly epoch: Readonly<Epoch>;
  /** `<leaseUid>/<transitions>`: put it on side effects so stale writes can be recognised. */
  readonly epochString: string;
  /** Aborts when the term ends (lost, expired or shut down); `reason` says why. */
  readonly signal: AbortSignal;
  /** Throws PortalError(TermExpired) unless the term is still valid. */
  assertValid(): void;
  isValid(): boolean;
  /** Monotonic ms (performance.now() scale) after which the term is invalid. */
  validUntil(): number;
}

export function epochString(epoch: Epoch): string {
  return `${epoch.leaseUid}/${epoch.transitions}`;
}
