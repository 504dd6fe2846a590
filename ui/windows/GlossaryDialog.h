#pragma once
// Help > Glossary: the terms the panels use, each in a sentence or two, in
// the words of docs/architecture.md's bookkeeping; and Help > About's text.
#include <QString>

class QWidget;

namespace kvscope::ui {

// The glossary as HTML: one <dt>term</dt><dd>meaning</dd> per term.
QString glossaryHtml();
// Shows the glossary window (non-modal, objectName "glossaryDialog"); one per parent.
void showGlossary(QWidget* parent);
// What kvscope is, and where its README is.
QString aboutText();

}  // namespace kvscope::ui
