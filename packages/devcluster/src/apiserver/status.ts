/**
 * Kubernetes `Status` errors, shaped exactly like kube-apiserver's
 * (k8s.io/apimachinery/pkg/api/errors): `details.kind` is the plural resource
 * for NotFound/AlreadyExists/Conflict and the Kind for Invalid.
 */
export interface StatusCause { reason: string; message: string; field?: string }
export interface StatusDetails {
  name?: string; group?: string; kind?: string; uid?: string;
  causes?: StatusCause[]; retryAfterSeconds?: number;
}
export interface StatusBody {
  kind: 'Status'; apiVersion: 'v1'; metadata: Record<string, never>;
  status: 'Failure' | 'Success'; message?: string; reason?: string;
  details?: StatusDetails; code: number;
}

/** A failed API call; `toStatus()` is the body sent to the client. */
export class ApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: StatusDetails | undefined;
  constructor(code: number, reason: string, message: string, details?: StatusDetails) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.reason = reason;
    this.details = details;
  }
  toStatus(): StatusBody {
    const s: StatusBody = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: this.message, reason: this.reason, code: this.code };
    if (this.details) s.details = this.details;
    return s;
  }
}

/** `leases.coordination.k8s.io` or `pods` (core types omit the group). */
export function qualified(resource: string, group: string): string {
  return group ? `${resource}.${group}` : resource;
}

function gr(resource: string, group: string, name: string): StatusDetails {
  return group ? { name, group, kind: resource } : { name, kind: resource };
}

export const errors = {
  notFound: (resource: string, group: string, name: string) =>
    new ApiError(404, 'NotFound', `${qualified(resource, group)} "${name}" not found`, gr(resource, group, name)),
  alreadyExists: (resource: string, group: string, name: string) =>
    new ApiError(409, 'AlreadyExists', `${qualified(resource, group)} "${name}" already exists`, gr(resource, group, name)),
  conflict: (resource: string, group: string, name: string) =>
    new ApiError(409, 'Conflict',
      `Operation cannot be fulfilled on ${qualified(resource, group)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      gr(resource, group, name)),
  invalid: (kind: string, group: string, name: string, causes: StatusCause[]) => {
    const parts = causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message));
    const list = parts.length === 1 ? parts[0] : `[${parts.join(', ')}]`;
    const details: StatusDetails = group ? { name, group, kind, causes } : { name, kind, causes };
    return new ApiError(422, 'Invalid', `${qualified(kind, group)} "${name}" is invalid: ${list}`, details);
  },
  badRequest: (message: string) => new ApiError(400, 'BadRequest', message),
  methodNotAllowed: (message = 'the server does not allow this method on the requested resource') =>
    new ApiError(405, 'MethodNotAllowed', message),
  unsupportedMediaType: (contentType: string) =>
    new ApiError(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`, { causes: [{ reason: 'UnsupportedMediaType', message: contentType }] }),
  expired: (message: string) => new ApiError(410, 'Expired', message),
  gone: (message: string) => new ApiError(410, 'Gone', message),
  forbidden: (resource: string, group: string, name: string, message: string) =>
    new ApiError(403, 'Forbidden', `${qualified(resource, group)} "${name}" is forbidden: ${message}`, gr(resource, group, name)),
  unauthorized: () => new ApiError(401, 'Unauthorized', 'Unauthorized'),
  internal: (message: string) => new ApiError(500, 'InternalError', `Internal error occurred: ${message}`, { causes: [{ reason: '', message }] }),
  tooManyRequests: (message: string, retryAfterSeconds = 1) =>
    new ApiError(429, 'TooManyRequests', message, { retryAfterSeconds }),
};

export function successStatus(details: StatusDetails, code = 200): StatusBody {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details, code };
}
