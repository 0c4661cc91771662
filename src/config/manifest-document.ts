/** A document read from a manifest file, and a problem reading one (config/manifests.ts reads them; sources/rule-files.ts and vap-files.ts check them). */
export interface ManifestDocument {
  /** The file the object came from. */
  source: string;
  /** Position of the object in its file (0-based, after expanding lists). */
  index: number;
  object: Record<string, unknown>;
}

export interface ManifestError {
  source: string;
  message: string;
}
