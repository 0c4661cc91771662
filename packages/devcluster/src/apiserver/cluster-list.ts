/** Reads of a collection: label and field selectors, and chunked lists with continue tokens as kube-apiserver issues them. */
import type { RequestScope } from './request-scope.ts';
import { present } from './request-scope.ts';
import { groupVersion, storeKey } from './registry.ts';
import { matchLabels, parseFieldSelector, parseLabelSelector } from './selectors.ts';
import { errors } from './status.ts';
import { objKey, type Store } from './store.ts';
import { meta, type Obj } from './types.ts';

/** Predicate for label + field selectors from the query. */
export function selectorFilter(s: RequestScope): (o: Obj) => boolean {
  const labels = parseLabelSelector(s.query.get('labelSelector'));
  const fields = parseFieldSelector(s.query.get('fieldSelector'), (f) =>
    f === 'metadata.name' || f === 'metadata.namespace' || Object.hasOwn(s.def.fieldSelectors, f));
  return (o: Obj) => {
    const m = meta(o);
    if (labels.length && !matchLabels(labels, m.labels)) return false;
    for (const f of fields) {
      const v = f.field === 'metadata.name' ? m.name : f.field === 'metadata.namespace' ? (m.namespace ?? '') : s.def.fieldSelectors[f.field]!(o);
      if ((v === f.value) === f.negate) return false;
    }
    return true;
  };
}

/** The list answer of `s` (its selectors, limit and continue token) over `store`. */
export function listObjects(store: Store, s: RequestScope): Obj {
  const match = selectorFilter(s);
  const limit = Number(s.query.get('limit') ?? '0');
  let listRv = store.currentRv();
  let after: string | undefined;
  const cont = s.query.get('continue');
  if (cont) {
    let token: { rv: number; start: string };
    try {
      token = JSON.parse(Buffer.from(cont, 'base64url').toString('utf8')) as { rv: number; start: string };
    } catch {
      throw errors.badRequest('continue key is not valid: illegal base64 data');
    }
    if (token.rv < store.compactedRv()) {
      throw errors.expired('The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.');
    }
    listRv = token.rv;
    after = token.start;
  }
  const all = store.list(storeKey(s.def), s.def.namespaced && s.namespace ? s.namespace : undefined);
  const items: Obj[] = [];
  let cursor: string | undefined;
  let remaining = 0;
  for (const o of all) {
    const m = meta(o);
    const key = objKey(m.namespace ?? '', m.name ?? '');
    if (after !== undefined && key <= after) continue;
    if (!match(o)) continue;
    if (limit > 0 && items.length >= limit) {
      remaining++;
      continue;
    }
    items.push(o);
    cursor = key;
  }
  const metadata: Obj = { resourceVersion: String(listRv) };
  if (remaining > 0 && cursor !== undefined) {
    metadata['continue'] = Buffer.from(JSON.stringify({ rv: listRv, start: cursor })).toString('base64url');
    metadata['remainingItemCount'] = remaining;
  }
  const shaped = items.map((o) => {
    if (!s.def.builtin) return present(s.def, o);
    const { apiVersion: _a, kind: _k, ...rest } = o;
    return rest;
  });
  return { kind: s.def.listKind, apiVersion: groupVersion(s.def), metadata, items: shaped };
}
