// Tap to zoom: on a narrow screen a figure opens in a full-screen view at the width the desktop
// column gives it (qkov.plotting.BOOK_WIDTH_PX), where its text is as legible as there; the view
// scrolls sideways. On a wide screen the figure's link opens its SVG, as before.
document.addEventListener("click", function (event) {
  var link = event.target.closest("a.qkov-full-size");
  if (!link || window.innerWidth > 700) return;
  event.preventDefault();
  var view = document.createElement("dialog"), close = document.createElement("button");
  view.className = "qkov-zoom";
  close.type = "button";
  close.textContent = "Close";
  close.onclick = function () { view.close(); };
  view.addEventListener("close", function () { view.remove(); });
  view.append(close, link.querySelector("img").cloneNode());
  document.body.append(view);
  view.showModal();
});
