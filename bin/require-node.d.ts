// Types of require-node.js for the TypeScript that imports it (test/runtime).
export declare function requireNode(what: string): void;
export declare function nodeProblem(what: string, version: string, path: string): string | undefined;
