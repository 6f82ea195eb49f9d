// Runs before anything else on the page: counts what a person would see in the browser's console as a fault.
// Requests the Content-Security-Policy refused (window.vtmViolations), and console errors, uncaught exceptions and
// unhandled promise rejections (window.vtmConsoleErrors, also from the viewer's own asynchronous mesh loading);
// page.js puts both into its data-vtm-status and shows the errors in its error box.
window.vtmViolations = [];
window.vtmConsoleErrors = [];
(function () {
  function note(text) {
    if (window.vtmConsoleErrors.length < 20) window.vtmConsoleErrors.push(String(text).slice(0, 300));
    if (window.vtmPublish) window.vtmPublish();
  }
  document.addEventListener("securitypolicyviolation", function (e) {
    window.vtmViolations.push(String(e.blockedURI || e.violatedDirective));
    if (window.vtmPublish) window.vtmPublish();
  });
  var original = console.error;
  console.error = function () {
    note("console.error: " + Array.prototype.map.call(arguments, String).join(" "));
    return original.apply(console, arguments);
  };
  window.addEventListener("error", function (e) { note("uncaught: " + (e.message || e.type)); });
  window.addEventListener("unhandledrejection", function (e) { note("unhandled rejection: " + e.reason); });
})();
