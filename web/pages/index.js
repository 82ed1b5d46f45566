// The pages, in the order of the left navigation: adding a page is adding
// its module's name here (web/pages/NAME.js). A page module:
//   export default {
//     path: "/operations/:id",   // hash route; ":x" a segment, ":x?" optional
//     title: "Operation",        // or (params) => "Operation op-1": the window title
//     nav: "Operations",         // optional: its entry in the left navigation
//     navPath: "/operations",    // optional: where that entry points (default: path)
//     view: ({ params, query }) => html`...`,  // a Preact component
//   }
// The session (who, tools, clusters) is useSession() from /lib/session.js.
export default ["clusters", "create", "cluster", "training", "training_job", "inference", "inference_detail", "models", "monitor", "diagnostics",
  "operations", "operation", "tools", "tool"];
