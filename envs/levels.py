"""Sokoban level files in the Boxoban / XSB text form: parsing, validation and writing.

A file holds levels separated by header lines that start with `;` (Boxoban writes `; 17`).
Each level is a block of rows drawn with

    #  wall            @  player             $  box             .  target
    *  box on target   +  player on target   ' ' (or `_`, `-`) floor

Blank lines end a level; text before the first header is allowed only if the file has no headers
at all (then blank-line separated blocks are levels, named by their index).

Ragged rows: XSB files often drop trailing floor, and Boxoban rows are all equally wide. Short
rows are padded on the right with **wall**, so the padding can never open a way out of a level
(spaces actually written, trailing ones included, are floor).
Every level must also be closed: the player must not be able to walk (through floor, targets and
boxes) to the edge of the grid. Other checks: exactly one player, as many boxes as targets and at
least one, only the characters above. A bad level raises `LevelFileError`, a `ValueError` whose
one-line message names the file, the level and the line, e.g.

    levels.txt: level '; 17' line 205: unknown character 'x'
"""
import dataclasses
import os
from typing import Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

WALL, FLOOR, PLAYER, BOX, TARGET, BOX_ON_TARGET, PLAYER_ON_TARGET = '#', ' ', '@', '$', '.', '*', '+'
_FLOOR_ALIASES = ('_', '-')
_KNOWN = frozenset('#@$.*+ ' + ''.join(_FLOOR_ALIASES))

Position = Tuple[int, int]


class LevelFileError(ValueError):
  """A malformed level file; the message names the file, the level and the line."""


@dataclasses.dataclass(frozen=True)
class Level:
  """One Sokoban level. Positions are (row, column), sorted; `walls` is a bool (H, W) array.

  Equality and hashing compare the puzzle (walls, targets, boxes, player), not name or index.
  """
  name: str                      # the header line (e.g. '; 17') or '#<index>' when there is none
  index: int                     # position of the level in its file, from 0
  walls: np.ndarray
  targets: Tuple[Position, ...]
  boxes: Tuple[Position, ...]
  player: Position

  @property
  def shape(self) -> Tuple[int, int]:
    return tuple(self.walls.shape)

  def to_text(self) -> str:
    """The level's rows (no header), one per line, each ending with a newline."""
    grid = np.where(self.walls, WALL, FLOOR).astype('<U1')
    for r, c in self.targets:
      grid[r, c] = TARGET
    for r, c in self.boxes:
      grid[r, c] = BOX_ON_TARGET if grid[r, c] == TARGET else BOX
    r, c = self.player
    grid[r, c] = PLAYER_ON_TARGET if grid[r, c] == TARGET else PLAYER
    return ''.join(''.join(row) + '\n' for row in grid)

  def __eq__(self, other):
    if not isinstance(other, Level):
      return NotImplemented
    return (self.walls.shape == other.walls.shape and bool(np.all(self.walls == other.walls))
            and self.targets == other.targets and self.boxes == other.boxes
            and self.player == other.player)

  def __hash__(self):
    return hash((self.walls.tobytes(), self.walls.shape, self.targets, self.boxes, self.player))


def _level_from_rows(rows: Sequence[Tuple[int, str]], name: str, index: int,
                     source: str) -> Level:
  """Builds and validates one level from (line number, text) rows."""

  def fail(lineno: int, what: str):
    raise LevelFileError(f'{source}: level {name!r} line {lineno}: {what}')

  first_line = rows[0][0]
  width = max(len(text) for _, text in rows)
  height = len(rows)
  walls = np.ones((height, width), dtype=bool)
  targets, boxes, players = [], [], []
  for r, (lineno, text) in enumerate(rows):
    for c, ch in enumerate(text):
      if ch not in _KNOWN:
        fail(lineno, f'unknown character {ch!r} (column {c + 1})')
      if ch == WALL:
        continue
      walls[r, c] = False
      if ch in (TARGET, BOX_ON_TARGET, PLAYER_ON_TARGET):
        targets.append((r, c))
      if ch in (BOX, BOX_ON_TARGET):
        boxes.append((r, c))
      if ch in (PLAYER, PLAYER_ON_TARGET):
        players.append(((r, c), lineno))
  if not players:
    fail(first_line, 'no player (@ or +)')
  if len(players) > 1:
    fail(players[1][1], f'{len(players)} players (@ or +), expected exactly one')
  if not boxes:
    fail(first_line, 'no boxes')
  if len(boxes) != len(targets):
    fail(first_line, f'{len(boxes)} boxes but {len(targets)} targets')
  player = players[0][0]
  # The player must stay inside the grid: flood fill through every non-wall cell.
  seen = {player}
  frontier = [player]
  while frontier:
    r, c = frontier.pop()
    if r in (0, height - 1) or c in (0, width - 1):
      fail(rows[r][0], f'level is not closed: the player can reach the edge at column {c + 1}')
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
      nxt = (r + dr, c + dc)
      if not walls[nxt] and nxt not in seen:
        seen.add(nxt)
        frontier.append(nxt)
  walls.setflags(write=False)
  return Level(name=name, index=index, walls=walls, targets=tuple(sorted(targets)),
               boxes=tuple(sorted(boxes)), player=player)


def parse_levels(text: str, source: str = '<string>') -> List[Level]:
  """Parses every level in `text`; `source` names the text in error messages."""
  lines = text.splitlines()
  has_headers = any(line.lstrip().startswith(';') for line in lines)
  levels: List[Level] = []
  name: Optional[str] = None
  rows: List[Tuple[int, str]] = []

  def flush():
    nonlocal rows
    if rows:
      idx = len(levels)
      levels.append(_level_from_rows(rows, name if name is not None else f'#{idx}', idx, source))
    rows = []

  for lineno, raw in enumerate(lines, start=1):
    line = raw.rstrip('\r\n')
    if line.lstrip().startswith(';'):
      flush()
      name = line.strip()
      continue
    if not line.strip():
      flush()
      continue
    if has_headers and name is None:
      raise LevelFileError(f'{source}: line {lineno}: level rows before the first \';\' header')
    rows.append((lineno, line))
  flush()
  return levels


def load_levels(path: Union[str, os.PathLike]) -> List[Level]:
  """Reads and parses a level file; errors name the file by its base name."""
  path = os.fspath(path)
  try:
    with open(path, 'r', encoding='utf-8') as f:
      text = f.read()
  except UnicodeDecodeError as e:
    raise LevelFileError(f'{os.path.basename(path)}: not a UTF-8 text file ({e})') from e
  levels = parse_levels(text, source=os.path.basename(path))
  if not levels:
    raise LevelFileError(f'{os.path.basename(path)}: no levels in file')
  return levels


def format_level(level: Level, header: Optional[str] = None) -> str:
  """One level as text: header line, rows, blank line (the Boxoban layout)."""
  header = level.name if header is None else header
  if not header.startswith(';'):
    header = '; ' + header
  return header + '\n' + level.to_text() + '\n'


def save_levels(levels: Iterable[Level], path: Union[str, os.PathLike],
                renumber: bool = True) -> None:
  """Writes levels in the Boxoban form; headers are `; i` (renumbered) or the levels' names."""
  with open(path, 'w', encoding='utf-8') as f:
    for i, level in enumerate(levels):
      f.write(format_level(level, header=f'; {i}' if renumber else None))


def level_from_arrays(room_fixed: np.ndarray, room_state: np.ndarray, name: str = '',
                      index: int = 0) -> Level:
  """A Level from gym-sokoban's encoding.

  room_fixed: 0 wall, 1 floor, 2 target. room_state: 0 wall, 1 floor, 2 target, 3 box on target,
  4 box off target, 5 player.
  """
  room_fixed = np.asarray(room_fixed)
  room_state = np.asarray(room_state)
  walls = room_fixed == 0
  walls.setflags(write=False)
  targets = tuple(sorted(map(tuple, np.argwhere(room_fixed == 2).tolist())))
  boxes = tuple(sorted(map(tuple, np.argwhere((room_state == 3) | (room_state == 4)).tolist())))
  players = np.argwhere(room_state == 5).tolist()
  if len(players) != 1:
    raise ValueError(f'room has {len(players)} players, expected 1')
  return Level(name=name, index=index, walls=walls, targets=targets, boxes=boxes,
               player=tuple(players[0]))
