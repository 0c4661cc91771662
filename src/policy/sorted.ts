/** What the RuleSet picks from its slots, defined ones only, in key order (its evaluation order is deterministic). */
export function sortedByKey<S, T extends { key: string }>(slots: Iterable<S>, pick: (slot: S) => T | undefined): T[] {
  const out: T[] = [];
  for (const slot of slots) {
    const item = pick(slot);
    if (item !== undefined) out.push(item);
  }
  return out.sort((a, b) => a.key.localeCompare(b.key));
}
