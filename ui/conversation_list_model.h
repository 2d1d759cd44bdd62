#pragma once
// The conversation list as a Qt item model: one row per stored conversation (its title, or
// "(untitled)"), its id under IdRole. ChatController fills it from the store's answers; the
// Chats view shows it in a QListView.

#include <QAbstractListModel>
#include <QVector>

#include "chat_store.h"

namespace spillway::ui {

class ConversationListModel : public QAbstractListModel {
    Q_OBJECT
public:
    enum Role { IdRole = Qt::UserRole };
    using QAbstractListModel::QAbstractListModel;

    int rowCount(const QModelIndex& parent = QModelIndex()) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;

    void setItems(const QVector<ConversationItem>& items);
    qint64 idAt(int row) const;  // 0 outside the list
    int rowOf(qint64 id) const;  // -1 when absent
    QString titleAt(int row) const;

private:
    QVector<ConversationItem> m_items;
};

}  // namespace spillway::ui
