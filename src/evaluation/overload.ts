/**
 * The pool's overload answers (issue 31 item 2): QueueFull errors whose
 * messages say which flow is overloaded and that this is overload, not a
 * policy verdict. The admission server answers them as a 429 denial and
 * keeps them out of the readiness window (admission/answerer.ts).
 */
import { ErrorCode, PortalError } from '../observability/errors.ts';
import { describeFlow } from './flows.ts';

const NOT_A_VERDICT = 'This is overload, not a policy verdict';

/** The pool's whole queue is full. `workers` names them, e.g. "2 admission evaluation workers". */
export function queueFull(workers: string, maxQueue: number): PortalError {
  return new PortalError(ErrorCode.QueueFull, `portal is overloaded: ${maxQueue} evaluations are already waiting for the ${workers}; refused rather than queued. ${NOT_A_VERDICT}`);
}

/** One flow's share of the queue is full. */
export function flowFull(workers: string, flow: string, flowQueue: number): PortalError {
  return new PortalError(
    ErrorCode.QueueFull,
    `portal is overloaded: ${describeFlow(flow)} already has ${flowQueue} evaluations waiting or running (its share of the ${workers}); refused rather than queued. ${NOT_A_VERDICT}`,
  );
}

/** A first evaluation no worker started in time for its whole budget within the request's time. */
export function notStarted(workers: string, flow: string, waitedMs: number): PortalError {
  return new PortalError(
    ErrorCode.QueueFull,
    `portal is overloaded: the evaluation waited ${Math.round(waitedMs)} ms behind the load of ${describeFlow(flow)} for one of the ${workers} and could not start in time to be answered within the webhook's timeout. ${NOT_A_VERDICT}`,
  );
}
