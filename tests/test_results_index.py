"""results/README.md indexes every page under results/, and every link in it leads to a file."""
import os
import re
import subprocess

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'results')
INDEX = os.path.join(RESULTS, 'README.md')


def _ignored(paths):
  """The paths git ignores: a run's own pages (an experiment in progress here) are not the
  published results, and a clean clone has none of them."""
  r = subprocess.run(['git', 'check-ignore', '--stdin'], cwd=RESULTS, input='\n'.join(paths),
                     capture_output=True, text=True)
  return set(r.stdout.splitlines()) if r.returncode in (0, 1) else set()


def _pages():
  pages = []
  for root, _, files in os.walk(RESULTS):
    for name in files:
      path = os.path.relpath(os.path.join(root, name), RESULTS)
      if name.endswith('.md') and path != 'README.md':
        pages.append(path)
  return sorted(set(pages) - _ignored(pages))


def _links():
  with open(INDEX) as f:
    return set(re.findall(r'\]\(([^)]+\.md)\)', f.read()))


def test_every_page_is_indexed():
  links = {os.path.normpath(link) for link in _links()}
  missing = sorted(set(_pages()) - links)
  assert not missing, f'pages not in results/README.md: {missing}'


def test_every_link_leads_to_a_page():
  dead = sorted(link for link in _links() if not os.path.exists(os.path.join(RESULTS, link)))
  assert not dead, f'results/README.md links to missing pages: {dead}'
