"""Where the suite's source lives and where its methods come from: the repository's address is set
in one place (pyproject.toml's [project.urls] Repository, or the workflow's repository) and every
page links it; each method's paper is declared by its class and listed on the board."""

from __future__ import annotations

import re

import pytest

from suite.site import citation, known
from suite.site.pages import environment
from tests.test_site_board import build, train

ADDRESS = "https://github.example/owner/attention-suite"


class FakeMetadata:
    def __init__(self, urls: list[str]):
        self.urls = urls

    def get_all(self, name: str) -> list[str]:
        return self.urls if name == "Project-URL" else []


def test_the_address_is_the_workflows_repository_else_pyprojects(monkeypatch):
    monkeypatch.setattr(citation, "metadata", lambda name: FakeMetadata(["Homepage, https://a.example",
                                                                         f"Repository, {ADDRESS}"]))
    assert citation.repository_url({}) == ADDRESS
    # Built in a GitHub workflow, the site names the repository the workflow runs in (a fork's own).
    assert citation.repository_url({"GITHUB_REPOSITORY": "fork/suite"}) == "https://github.com/fork/suite"
    assert citation.repository_url({"GITHUB_REPOSITORY": "fork/suite", "GITHUB_SERVER_URL": "https://ghe.example/"}) \
        == "https://ghe.example/fork/suite"
    monkeypatch.setattr(citation, "metadata", lambda name: FakeMetadata(["Homepage, https://a.example"]))
    assert citation.repository_url({}) is None  # no Repository entry: no address, none invented


@pytest.fixture
def workflow_address(monkeypatch):
    """Build as a GitHub workflow of ADDRESS would: the pages' environment is made again with it."""
    server, repository = ADDRESS.rsplit("/", 2)[0], "/".join(ADDRESS.rsplit("/", 2)[1:])
    monkeypatch.setenv("GITHUB_SERVER_URL", server)
    monkeypatch.setenv("GITHUB_REPOSITORY", repository)
    environment.cache_clear()
    yield ADDRESS
    monkeypatch.undo()
    environment.cache_clear()


def test_every_page_links_the_repository_and_a_run_page_clones_it(tmp_path, workflow_address):
    records = [train("softmax", seed=s, test=0.9 + 0.01 * s, curve=[[100, 0.5], [200, 0.9]]) for s in range(3)]
    build(tmp_path, records)
    pages = sorted((tmp_path / "out").rglob("*.html"))
    assert len(pages) >= 6  # board, plots, runs, a curves page, three run pages
    for page in pages:
        assert f'<a class="source" href="{workflow_address}">Source</a>' in page.read_text(), page.name
    run_page = next(p for p in pages if p.parent.name == "runs").read_text()
    clone = f"git clone {workflow_address} attention-suite && cd attention-suite\ngit checkout c0ffee0"
    assert clone in run_page


def test_each_method_declares_its_paper_and_the_board_lists_it(tmp_path):
    for method in known.canonical_order():
        paper = known.paper(method)
        assert paper is not None, f"{method} declares no whole paper (authors, year, title, https url)"
        assert re.fullmatch(r"https://arxiv\.org/abs/\d{4}\.\d{4,5}", paper.url) and 2000 < paper.year < 2100
    page = build(tmp_path, [train("linear", seed=s, test=0.9) for s in range(2)] + [train("mine", test=0.5)])
    table = re.search(r'<table class="papers">.*?</table>', page, re.S).group(0)
    assert ('<tr><th scope="row">linear</th><td><a href="https://arxiv.org/abs/2006.16236">Transformers are RNNs: '
            "Fast Autoregressive Transformers with Linear Attention</a></td><td>A. Katharopoulos, A. Vyas, N. Pappas, "
            "F. Fleuret</td><td>2020</td></tr>") in table
    assert '<tr><th scope="row">mine</th><td class="empty" colspan="3">no paper declared</td></tr>' in table


def test_a_paper_not_declared_whole_is_not_taken(monkeypatch):
    declared = {"whole": {"authors": "A. B", "year": 2020, "title": "T", "url": "https://x.example/1"},
                "script": {"authors": "A. B", "year": 2020, "title": "T", "url": "javascript:alert(1)"},
                "yearless": {"authors": "A. B", "title": "T", "url": "https://x.example/1"}}
    monkeypatch.setattr(known, "class_constants", lambda method: {"paper": declared[method]})
    assert known.paper("whole") == known.Paper("A. B", 2020, "T", "https://x.example/1")
    assert known.paper("script") is None and known.paper("yearless") is None
