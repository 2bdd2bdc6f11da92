// The run page's support subgraph (the query triple highlighted) and the claim page's pseudo-subgraph: entities as
// nodes, relations as edges. Bundled by esbuild into static/kgv/dist/graph.js; static/kgv/run.js and claim.js call
// window.KGVGraph.draw().
import cytoscape from "cytoscape";

const STYLE = [
  {
    selector: "node",
    style: {
      label: "data(label)",
      "font-size": 11,
      "text-wrap": "wrap",
      "text-max-width": 120,
      "text-valign": "bottom",
      "text-margin-y": 4,
      "background-color": "#6b7a90",
      width: 18,
      height: 18,
    },
  },
  { selector: "node.query", style: { "background-color": "#c0392b", width: 26, height: 26, "font-weight": "bold" } },
  {
    selector: "edge",
    style: {
      label: "data(label)",
      "font-size": 9,
      "curve-style": "bezier",
      "target-arrow-shape": "triangle",
      "line-color": "#9aa5b5",
      "target-arrow-color": "#9aa5b5",
      "text-rotation": "autorotate",
      "text-background-color": "#fff",
      "text-background-opacity": 0.8,
      width: 1.5,
    },
  },
  { selector: "edge.cited", style: { "line-color": "#2c7a4b", "target-arrow-color": "#2c7a4b", width: 2.5 } },
  {
    selector: "edge.query",
    style: { "line-color": "#c0392b", "target-arrow-color": "#c0392b", "line-style": "dashed", width: 3 },
  },
  { selector: ".selected-evidence", style: { "overlay-color": "#f1c40f", "overlay-opacity": 0.35 } },
  // A claim's pseudo-subgraph (the claim page): an unknown the claim only describes, and whether each part holds.
  { selector: "node.unknown", style: { shape: "diamond", "background-color": "#d98e04", width: 24, height: 24 } },
  { selector: "edge.supported", style: { "line-color": "#2c7a4b", "target-arrow-color": "#2c7a4b", width: 2.5 } },
  { selector: "edge.refuted", style: { "line-color": "#c0392b", "target-arrow-color": "#c0392b", width: 2.5 } },
  { selector: "edge.open", style: { "line-style": "dashed" } },
  { selector: "edge.negated", style: { "target-arrow-shape": "tee" } },
];

function elementsOf(data) {
  const nodes = data.nodes.map((n) => ({
    data: { id: n.id, label: n.label || n.id },
    classes: [n.query ? "query" : "", n.unknown ? "unknown" : ""].join(" ").trim(),
  }));
  const edges = data.edges.map((e) => ({
    data: { id: e.id, source: e.source, target: e.target, label: e.label || e.relation, keys: e.keys || [] },
    classes: [e.query ? "query" : "", e.cited ? "cited" : "", e.state || "", e.negated ? "negated" : ""].join(" ").trim(),
  }));
  return nodes.concat(edges);
}

// Draw ``data`` ({nodes: [{id, label, query, unknown}], edges: [{id, source, target, label, query, cited, keys,
// state, negated}]}; state: supported / refuted / open, a claim part's)
// into ``container``; ``onSelect(keys)`` is told which evidence keys an edge came from when it is clicked.
function draw(container, data, onSelect) {
  const cy = cytoscape({
    container,
    elements: elementsOf(data),
    style: STYLE,
    layout: { name: data.nodes.length > 2 ? "cose" : "grid", animate: false, padding: 30, nodeRepulsion: 400000, idealEdgeLength: 140 },
    wheelSensitivity: 0.3,
    maxZoom: 1.6, // a two-node graph would otherwise fill the box with giant labels
    minZoom: 0.2,
  });
  cy.on("tap", "edge", (event) => {
    cy.elements().removeClass("selected-evidence");
    event.target.addClass("selected-evidence");
    if (onSelect) onSelect(event.target.data("keys"));
  });
  return {
    cy,
    highlight(key) {
      cy.elements().removeClass("selected-evidence");
      cy.edges().filter((edge) => edge.data("keys").includes(key)).addClass("selected-evidence");
    },
  };
}

window.KGVGraph = { draw };
