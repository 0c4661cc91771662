/** The listen errors a user can act on, as one line each (no heavy imports: the CLI checks the port first). */
import { ErrorCode, PortalError, toError } from 'portal/dev-api';

/** EADDRINUSE / EACCES as a PortalError (ConfigInvalid) with the message a user can act on; other errors unchanged. */
export function listenError(err: unknown, host: string, port: number): Error {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE') {
    return new PortalError(ErrorCode.ConfigInvalid, `port ${port} on ${host} is already in use: stop what listens there, or pass --port with another port (0 picks a free one)`, { cause: err });
  }
  if (code === 'EACCES') {
    return new PortalError(ErrorCode.ConfigInvalid, `not allowed to listen on ${host}:${port}: pass --port with a port above 1023 (0 picks a free one)`, { cause: err });
  }
  return toError(err);
}
