//! RFC 8785 (JCS) canonical JSON. (Filled in by the canonical-JSON work.)
