/**
 * Contract between the embedded API server and an admission chain (e.g. the
 * validating-webhook caller in src/devcluster/webhook-admission.ts). The server
 * calls `admit()` for every create/update/delete (including the status and
 * eviction subresources; patches arrive as UPDATE), except for
 * Validating/MutatingWebhookConfiguration objects themselves.
 */
export interface AdmissionAttributes {
  operation: 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
  kind: { group: string; version: string; kind: string };
  resource: { group: string; version: string; resource: string };
  subResource: string;            // "" when none
  namespace: string;              // "" for cluster-scoped
  name: string;
  namespaced: boolean;
  object: Record<string, unknown> | null;
  oldObject: Record<string, unknown> | null;
  userInfo: { username: string; uid: string; groups: string[] };
  dryRun: boolean;
  options: Record<string, unknown> | null;   // CreateOptions/UpdateOptions/DeleteOptions
}
/**
 * `auditAnnotations`: what the admission chain asks the API server to record
 * in the request's audit event, keys already prefixed (`<webhook name>/<key>`),
 * as kube-apiserver does with a webhook's AdmissionResponse.auditAnnotations.
 */
export type AdmissionOutcome =
  | { allowed: true; warnings: string[]; auditAnnotations?: Record<string, string> }
  | { allowed: false; warnings: string[]; status: { code: number; reason: string; message: string }; auditAnnotations?: Record<string, string> };
export interface AdmissionContext {
  /** Labels of namespace `name`, undefined if it doesn't exist. */
  namespaceLabels(name: string): Record<string, string> | undefined;
  /** Current admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration objects. */
  validatingWebhookConfigurations(): Record<string, unknown>[];
  signal: AbortSignal;
}
export interface AdmissionHook {
  admit(attrs: AdmissionAttributes, ctx: AdmissionContext): Promise<AdmissionOutcome>;
}

/**
 * How a write through a subresource other than status is admitted: as
 * kube-apiserver's subresource storage does (e.g. ScaleREST), the request is
 * `<resource>/<subresource>` with the subresource's own kind and object
 * (autoscaling/v1 Scale), never an UPDATE of the parent. So a webhook whose
 * rules name only `deployments` is not called for `kubectl scale`; one
 * naming `deployments/scale` or `*\/scale` is, and sees the Scale.
 */
export interface AdmittedView {
  subresource: string;
  kind: { group: string; version: string; kind: string };
  view(parent: Record<string, unknown>): Record<string, unknown>;
}
