// One operation (#/operations/ID): its steps and timings like a build
// log, live progress, its children, the result or error, and cancel.
import { html } from "/vendor/preact-htm.js";
import { href } from "/lib/router.js";
import { OperationView } from "/lib/op.js";

function Operation({ params }) {
  return html`<p class="crumbs"><a href=${href("/operations")}>Operations</a> / <code>${params.id}</code></p>
    <${OperationView} id=${params.id}/>`;
}

export default { path: "/operations/:id", title: (p) => "Operation " + p.id, view: Operation };
