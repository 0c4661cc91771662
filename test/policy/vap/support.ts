export * from '../../../src/policy/vap/index.ts';
export type KubeObjectLike = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> }; [k: string]: unknown };
