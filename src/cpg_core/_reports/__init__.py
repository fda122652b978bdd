"""Every rendering of cpg's documents for people and machines, in one place: the review report
(Markdown for a pull request, one self-contained HTML file), its traffic graph, the dropped-flow
view cpg-mcp pages through, and the triage helpers the run summary uses. Pure: documents in,
text out; the adapters read the files and print."""
