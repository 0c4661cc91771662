/**
 * Kubernetes object shapes shared by every layer (kube/, policy/, leader/,
 * audit/, admission/): plain JSON as it comes off the wire. Types only, no
 * code, no imports — so depending on it never drags a layer upwards.
 */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [key: string]: unknown;
}

/** group/version/kind as in an AdmissionReview request. */
export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

/** A Kubernetes object as plain JSON. */
export type KubeObject = Record<string, unknown> & {
  apiVersion?: string;
  kind?: string;
  metadata?: Partial<ObjectMeta>;
};

