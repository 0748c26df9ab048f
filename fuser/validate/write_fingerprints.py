"""`python -m fuser.validate.write_fingerprints`: writes `fuser/manifest/fingerprints.json`, every lowered op's
fingerprint on each arch with a manifest, for the fuser's source as it is now (`fuser.lower.lowerings`). Run it
after any change under fuser/ and commit the table (CI fails while it is out of date); about 0.1 s an op
and arch."""

from __future__ import annotations

import json

from fuser.lower.lowerings import SHIPPED, fuser_source_hash, shipped_table

if __name__ == "__main__":
    table = shipped_table(fresh=True)
    SHIPPED.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {SHIPPED} for {', '.join(table['fingerprints'])} at source {fuser_source_hash()}")
