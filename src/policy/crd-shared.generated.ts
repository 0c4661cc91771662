// GENERATED from charts/portal/crds/portal.dev_portal{clusterrules,exceptions}.yaml by
// `node --import tsx test/policy/generate-crd-schema.ts`. Do not edit by hand:
// edit the CRD manifest and regenerate.

/* The parts of the Portal CRD schemas that occur more than once, written once. */

export const CONDITIONS: Readonly<Record<string, unknown>> = {
  "type": "array",
  "x-kubernetes-list-type": "map",
  "x-kubernetes-list-map-keys": [
    "type"
  ],
  "items": {
    "type": "object",
    "required": [
      "type",
      "status",
      "reason",
      "message"
    ],
    "properties": {
      "type": {
        "type": "string"
      },
      "status": {
        "type": "string",
        "enum": [
          "True",
          "False",
          "Unknown"
        ]
      },
      "reason": {
        "type": "string"
      },
      "message": {
        "type": "string"
      },
      "lastTransitionTime": {
        "type": "string",
        "format": "date-time"
      },
      "observedGeneration": {
        "type": "integer",
        "format": "int64"
      }
    }
  }
};

export const LABEL_SELECTOR_PROPERTIES: Readonly<Record<string, unknown>> = {
  "matchLabels": {
    "type": "object",
    "additionalProperties": {
      "type": "string"
    }
  },
  "matchExpressions": {
    "type": "array",
    "items": {
      "type": "object",
      "required": [
        "key",
        "operator"
      ],
      "properties": {
        "key": {
          "type": "string"
        },
        "operator": {
          "type": "string",
          "enum": [
            "In",
            "NotIn",
            "Exists",
            "DoesNotExist"
          ]
        },
        "values": {
          "type": "array",
          "items": {
            "type": "string"
          }
        }
      }
    }
  }
};
