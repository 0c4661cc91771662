export * from './manager.ts';
export * from '../util/runnable.ts';
