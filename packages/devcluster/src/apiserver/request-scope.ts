/**
 * One API request as the REST semantics (cluster.ts) see it, and what each
 * verb reads off it the same way: dry run, the field manager, the options
 * admission gets, and the decoding checks of a body.
 */
import type { Typing, Writer } from './apply/managed.ts';
import { managerFromUserAgent } from './apply/managed.ts';
import { dropUnknownFields, fieldValidation, strictDecodingMessage } from './openapi/fields.ts';
import { typeModel } from './openapi/model.ts';
import { groupVersion, type ResourceDef } from './registry.ts';
import { ApiError, errors } from './status.ts';
import { clone, nowTimestamp, type Obj, type UserInfo } from './types.ts';
import { checkDecodable } from './validation.ts';

export interface RequestScope {
  def: ResourceDef;
  namespace: string;
  name: string;
  subresource: string;
  user: UserInfo;
  query: URLSearchParams;
  /** Admission warnings collected for the response. */
  warnings: string[];
  /** Audit annotations the admission chain asked to record (VAP, webhooks), for the audit log. */
  auditAnnotations?: Record<string, string>;
  /** The request's User-Agent ('' when absent): the default field manager. Unset for writes from inside the server. */
  userAgent?: string;
  /** Duplicate keys the body decoder found, in kube's wording (strict decoding errors). */
  duplicateFields?: string[];
}

export interface Reply { code: number; body: unknown }

/** The object as served at `def`'s version (kind/apiVersion set). */
export function present(def: ResourceDef, o: Obj): Obj {
  return { ...o, apiVersion: groupVersion(def), kind: def.kind };
}

/** The schema server-side apply walks; resources without one are untyped (maps granular, lists atomic). */
export function typing(def: ResourceDef): Typing {
  const model = typeModel(def);
  return model ? { nav: model, root: model.root } : { nav: { resolve: (x) => x }, root: undefined };
}

/** `?dryRun=All`, or a 400 for any other value. */
export function isDryRun(s: RequestScope): boolean {
  const d = s.query.getAll('dryRun');
  if (d.length === 0) return false;
  if (d.some((v) => v !== 'All')) throw errors.badRequest(`Invalid dry run value: ${d.join(',')}`);
  return true;
}

/**
 * An applied configuration must fit the schema whatever fieldValidation
 * says: kube-apiserver cannot build its typed patch otherwise (a 500 with
 * an empty reason, which kubectl prints as "Error from server").
 */
export function checkApplyFields(s: RequestScope, applied: Obj): void {
  const model = typeModel(s.def);
  if (!model) return;
  const unknown = dropUnknownFields(model, clone(applied), 'smd');
  if (unknown.length === 0) return;
  const gvk = `${s.def.group}/${s.def.version}, Kind=${s.def.kind}`;
  const where = `${s.def.namespaced ? s.namespace : ''}/${s.name}; ${gvk}`;
  throw new ApiError(500, '', `failed to create typed patch object (${where}): ${unknown[0]!}: field not declared in schema`);
}

/** What decoding the body does in kube-apiserver: format errors, and unknown fields per fieldValidation. */
export function decodeChecks(s: RequestScope, obj: Obj, patched = false): void {
  checkDecodable(s.def, obj);
  const model = typeModel(s.def);
  const found = [...(s.duplicateFields ?? []), ...(model ? dropUnknownFields(model, obj).map((p) => `unknown field "${p}"`) : [])];
  if (found.length === 0) return;
  const mode = fieldValidation(s.query);
  // A patched object is not a request body: kube's patch handler reports the bare strict decoding error.
  if (mode === 'Strict') throw errors.badRequest(patched ? `strict decoding error: ${found.join(', ')}` : strictDecodingMessage(s.def.kind, s.def.version, found));
  if (mode === 'Warn') s.warnings.push(...found);
}

/** Who writes, for managedFields: fieldManager, else the User-Agent's product (kube-apiserver's default). */
export function writer(s: RequestScope): Writer {
  return {
    // Writes from inside the server (no HTTP request) are named after their system user, as kube's own components are.
    manager: s.query.get('fieldManager') || (s.userAgent === undefined ? s.user.username.replace(/^system:/, '') : managerFromUserAgent(s.userAgent)),
    apiVersion: groupVersion(s.def), subresource: s.subresource, hasStatus: s.def.hasStatus, now: nowTimestamp(),
  };
}

/** The admission request's options object (CreateOptions, UpdateOptions). */
export function requestOptions(s: RequestScope, kind: string): Obj {
  const o: Obj = { kind, apiVersion: 'meta.k8s.io/v1' };
  const fm = s.query.get('fieldManager');
  if (fm) o['fieldManager'] = fm;
  if (s.query.getAll('dryRun').length) o['dryRun'] = s.query.getAll('dryRun');
  return o;
}
