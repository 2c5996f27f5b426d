// The report's asciicast player: each .player holds its session's frames
// (screens rendered by rfs from the recording, as SVG) in a JSON script
// element; this steps through them in time. No network, no library.
(function () {
  "use strict";
  function fmt(t) {
    var s = Math.floor(t);
    return Math.floor(s / 60) + ":" + ("0" + (s % 60)).slice(-2) + "." + Math.floor((t - s) * 10);
  }
  function setup(player) {
    var data = document.getElementById(player.getAttribute("data-frames"));
    if (!data) return;
    var frames = JSON.parse(data.textContent);
    if (!frames.length) return;
    var screen = player.querySelector(".screen");
    var range = player.querySelector("input[type=range]");
    var button = player.querySelector("button");
    var clock = player.querySelector(".clock");
    var end = frames[frames.length - 1][0];
    var at = 0, timer = null, started = 0, offset = 0;
    range.max = String(frames.length - 1);
    function show(i) {
      at = Math.max(0, Math.min(frames.length - 1, i));
      screen.innerHTML = frames[at][1];
      range.value = String(at);
      clock.textContent = fmt(frames[at][0]) + " / " + fmt(end);
      player.setAttribute("data-frame", String(at));
    }
    function stop() {
      if (timer) { clearTimeout(timer); timer = null; }
      button.textContent = "▶ play";
    }
    function tick() {
      var now = offset + (performance.now() - started) / 1000;
      var i = at;
      while (i + 1 < frames.length && frames[i + 1][0] <= now) i++;
      if (i !== at) show(i);
      if (at + 1 >= frames.length) { stop(); return; }
      timer = setTimeout(tick, Math.max(10, Math.min(250, (frames[at + 1][0] - now) * 1000)));
    }
    function play() {
      if (at + 1 >= frames.length) show(0);
      offset = frames[at][0];
      started = performance.now();
      button.textContent = "❚❚ pause";
      tick();
    }
    button.addEventListener("click", function () { if (timer) stop(); else play(); });
    range.addEventListener("input", function () { stop(); show(parseInt(range.value, 10)); });
    show(frames.length - 1);
  }
  var players = document.querySelectorAll(".player");
  for (var i = 0; i < players.length; i++) setup(players[i]);
})();
