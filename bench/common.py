"""What the benchmark scripts share."""
import json
import os


def write_json(path: str, results) -> None:
  """Writes `results` as indented JSON, creating the parent directory."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, 'w') as f:
    json.dump(results, f, indent=2)
