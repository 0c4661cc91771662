// Lint config: typescript-eslint's recommended rules plus a few that keep the
// architecture honest (no floating promises in lifecycle code, no `process`
// outside src/cli).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.portal/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // node:test's describe/it/test return promises the runner tracks itself.
      '@typescript-eslint/no-floating-promises': [
        'error',
        { allowForKnownSafeCalls: [{ from: 'package', name: ['describe', 'it', 'test', 'suite', 'before', 'after', 'beforeEach', 'afterEach'], package: 'node:test' }] },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    // Components take typed config and an AbortSignal; only the CLI touches
    // the process (docs/design.md §11, habit 1).
    files: ['src/**/*.ts', 'packages/*/src/**/*.ts'],
    ignores: ['src/cli/**'],
    rules: {
      'no-restricted-globals': ['error', { name: 'process', message: 'Only src/cli may touch process; pass config and an AbortSignal instead.' }],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
  },
);
