#include "conversation_list_model.h"

namespace spillway::ui {

int ConversationListModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_items.size());
}

QVariant ConversationListModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= m_items.size()) return {};
    const ConversationItem& c = m_items[index.row()];
    switch (role) {
    case Qt::DisplayRole:
    case Qt::ToolTipRole: return c.title.isEmpty() ? tr("(untitled)") : c.title;
    case IdRole: return c.id;
    default: return {};
    }
}

void ConversationListModel::setItems(const QVector<ConversationItem>& items)
{
    beginResetModel();
    m_items = items;
    endResetModel();
}

qint64 ConversationListModel::idAt(int row) const { return row >= 0 && row < m_items.size() ? m_items[row].id : 0; }

int ConversationListModel::rowOf(qint64 id) const
{
    for (int i = 0; i < m_items.size(); ++i)
        if (m_items[i].id == id) return i;
    return -1;
}

QString ConversationListModel::titleAt(int row) const
{
    return data(index(row), Qt::DisplayRole).toString();
}

}  // namespace spillway::ui
