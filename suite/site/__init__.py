"""The leaderboard site: ``python -m suite.site`` reads every record under results/ and writes a
static site to site/_build/ that works opened from disk, with no network (see suite/site/build.py)."""

from suite.site.build import BuildReport, SiteError, build_site

__all__ = ["BuildReport", "SiteError", "build_site"]
