/**
 * A rule's `TypeChecked` condition (issue 33 item 1; src/policy/type-check.ts):
 * whether its field references were checked against the schemas of the kinds
 * it matches, and what was found. For an Audit rule (admitted at apply
 * despite problems) it is where the problems show; for a rule on a custom
 * kind whose CRD was not served yet it says the check was not done.
 *
 * Cached per stored rule object and schema generation: the status writer
 * asks on every pass, and the answer changes only with the rule or the CRDs.
 */
import type { KindSchemaSource } from '../policy/kind-schemas/catalogue.ts';
import { typeCheckCondition, typeCheckRule } from '../policy/type-check.ts';
import type { KubeObject, RuleSpec } from '../policy/types.ts';

export type TypeCheckedCondition = ReturnType<typeof typeCheckCondition>;

export class TypeCheckStatus {
  readonly #schemas: KindSchemaSource;
  readonly #generation: () => number;
  readonly #cache = new WeakMap<object, { generation: number; condition: TypeCheckedCondition }>();

  /** `generation`: changes whenever `schemas` answer differently (a CRD added, changed or removed). */
  constructor(schemas: KindSchemaSource, generation: () => number = () => 0) {
    this.#schemas = schemas;
    this.#generation = generation;
  }

  /** The condition of a stored rule that compiled; undefined when there is nothing to check. */
  condition(object: KubeObject | undefined): TypeCheckedCondition | undefined {
    const spec = (object as { spec?: RuleSpec } | undefined)?.spec;
    if (!object || !spec?.match?.kinds || !spec.validate) return undefined;
    const generation = this.#generation();
    const hit = this.#cache.get(object);
    if (hit && hit.generation === generation) return hit.condition;
    let condition: TypeCheckedCondition;
    try {
      condition = typeCheckCondition(typeCheckRule(spec, this.#schemas));
    } catch {
      // A spec the RuleSet compiled is well formed; anything else is not this condition's to judge.
      return undefined;
    }
    this.#cache.set(object, { generation, condition });
    return condition;
  }
}
