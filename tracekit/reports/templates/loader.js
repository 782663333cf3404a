/* tracekit: unpacks the page's plotly.js (tracekit/reports/html_pack.py) and then starts the
 * page script. The data block #tk-plotly holds plotly.js gzipped, 7 bits per character (a
 * character from U+0100 stands for its value minus 0x100). The bytes are gunzipped with the
 * browser's DecompressionStream and run as an inline script, which the page's
 * Content-Security-Policy allows by plotly.js's sha256 hash. The page script is wrapped in
 * tracekitStart(...): it runs once Plotly is defined. */
(function () {
  "use strict";
  const waiting = [];
  let ready = false;
  window.tracekitStart = function (app) {
    if (ready) app();
    else waiting.push(app);
  };
  function say(message) {
    const note = document.createElement("p");
    note.id = "tk-no-charts";
    note.className = "note";
    note.textContent = message;
    (document.querySelector("main") || document.body).prepend(note);
  }
  const block = document.getElementById("tk-plotly");
  const text = block.textContent;
  block.remove();
  if (typeof DecompressionStream !== "function") {
    say("This browser cannot unpack the page's charting library (it lacks DecompressionStream): " +
      "open the page in Chrome 80, Firefox 113, Safari 16.4 or later to see the charts.");
    return;
  }
  const bytes = new Uint8Array(Math.floor(text.length * 7 / 8));
  let acc = 0, bits = 0, out = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    acc = (acc << 7) | (c >= 0x100 ? c - 0x100 : c);
    bits += 7;
    if (bits >= 8) {
      bits -= 8;
      bytes[out++] = (acc >> bits) & 0xff;
      acc &= (1 << bits) - 1;
    }
  }
  const unpacked = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  new Response(unpacked).text().then((js) => {
    const script = document.createElement("script");
    script.textContent = js;
    document.head.append(script);
    script.remove();
    if (typeof Plotly === "undefined") throw new Error("plotly.js did not run");
    ready = true;
    for (const app of waiting.splice(0)) setTimeout(app, 0);
  }).catch((error) => {
    say("The page's charting library could not be unpacked (" + error + "): the charts are missing.");
    throw error;
  });
})();
