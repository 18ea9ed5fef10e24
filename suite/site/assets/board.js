// Sorting and filtering of the site's tables, in plain JavaScript; reads only the page's DOM.
"use strict";

function cellKey(row, index, kind) {
  const cell = row.children[index];
  if (!cell) return null;
  const raw = cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent.trim();
  if (kind === "num") return raw === "" ? null : Number(raw);
  return raw.toLowerCase();
}

function sortTable(table, index, kind, header) {
  const ascending = header.getAttribute("aria-sort") !== "ascending";
  table.querySelectorAll("thead th").forEach(th => th.removeAttribute("aria-sort"));
  header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  // Each body sorts on its own, so the published reference rows stay apart from ours.
  table.querySelectorAll("tbody").forEach(body => {
    const rows = Array.from(body.rows).filter(r => !r.classList.contains("group"));
    rows.sort((a, b) => {
      const x = cellKey(a, index, kind), y = cellKey(b, index, kind);
      if (x === null || y === null) return (x === null) - (y === null);  // missing values last
      const order = x < y ? -1 : x > y ? 1 : 0;
      return ascending ? order : -order;
    });
    rows.forEach(r => body.appendChild(r));
  });
}

function applyFilters() {
  const wanted = {};
  document.querySelectorAll("select[data-filter]").forEach(s => { wanted[s.dataset.filter] = s.value; });
  document.querySelectorAll("table.filterable tbody tr").forEach(row => {
    if (row.closest("tbody.reference")) return;
    const shown = Object.entries(wanted).every(([name, value]) => !value || row.dataset[name] === value);
    row.hidden = !shown;
  });
}

document.querySelectorAll("table.sortable").forEach(table => {
  table.querySelectorAll("thead th[data-sort]").forEach(th => {
    const sort = () => sortTable(table, th.cellIndex, th.dataset.sort, th);
    th.addEventListener("click", sort);
    th.addEventListener("keydown", e => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sort(); } });
  });
});
document.querySelectorAll("select[data-filter]").forEach(s => s.addEventListener("change", applyFilters));
